"""The test process's guard over ``ast.parse`` (``tests.support.ast_lock``): a finalizer that
parses, run by the garbage collector in the middle of a parse, must not fail the outer parse."""

from __future__ import annotations

import ast
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 13), reason="CPython 3.13 counts per parse (gh-106905)")

LINE = "def f{i}(a, b):\n    return [a + b * {i} for _ in range(3)] if a else {{'k': (a, b)}}"
SOURCE = "\n".join(LINE.format(i=i) for i in range(2000))


class ParsesWhenCollected:
    def __del__(self) -> None:
        ast.parse("y = (1 + 2) * 3")  # as 3.11's traceback does for a logged exception's carets


def test_a_parse_in_a_finalizer_does_not_fail_the_parse_it_interrupts() -> None:
    assert getattr(ast.parse, "guarded", False), "tests/conftest.py installs the guard"
    failures = []
    for _ in range(20):
        for _ in range(200):  # cycles: only the collector frees them, at some allocation of the parse
            junk = ParsesWhenCollected()
            junk.cycle = junk  # type: ignore[attr-defined]
        try:
            ast.parse(SOURCE)
        except SystemError as exc:
            failures.append(str(exc))
    assert failures == []
