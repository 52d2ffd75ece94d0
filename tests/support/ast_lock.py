"""``ast.parse`` made safe from re-entry in the test process, on CPython before 3.13.

CPython 3.11 keeps the depth counter of its AST conversion in interpreter-wide state (gh-106905).
The conversion allocates, so the garbage collector may run inside it; a finalizer it runs (an
asyncio future whose exception nobody read logs that exception, and 3.11's ``traceback`` parses
each frame's line to place its carets) then parses too, resets the counter, and the outer parse
fails with "SystemError: AST constructor recursion depth mismatch". CI saw it twice (the
import-cycle check, a hypothesis state machine). Pytest's rewriting, hypothesis and ``traceback``
all reach the parser through the module attribute, so wrapping it covers them: no collection
inside a parse, and one parse at a time (a finalizer's Python code could also switch threads).
"""

from __future__ import annotations

import ast
import functools
import gc
import sys
import threading

_lock = threading.RLock()
_original = ast.parse


def install() -> bool:
    """Wrap ``ast.parse`` (once); False where the interpreter needs no wrapping."""
    if sys.version_info >= (3, 13) or getattr(ast.parse, "guarded", False):
        return False

    @functools.wraps(_original)
    def parse(*args, **kwargs):
        with _lock:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return _original(*args, **kwargs)
            finally:
                if collecting:
                    gc.enable()

    parse.guarded = True  # type: ignore[attr-defined]
    ast.parse = parse
    return True
