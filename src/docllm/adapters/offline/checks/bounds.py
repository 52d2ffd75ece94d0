"""The bounds on every parser the offline checks run on a document's content (issue 48): a hostile
block (JSON 100,000 arrays deep, a YAML flow as deep, 100,000 unary minus signs) becomes a finding
and the review goes on, instead of a RecursionError or MemoryError that fails the task as a bug.

- depth: a block's bracket nesting is measured by a linear scan before its parser runs; over
  ``MAX_DEPTH`` it is not parsed. The parsers' own limits (CPython's parser stack, the recursion
  limit) are caught as a second line.
- size: a code block over ``MAX_BLOCK_BYTES`` is not parsed (the document itself is bounded by
  DOCLLM_MAX_DOCUMENT_BYTES, which bounds the Markdown parse).
- time: the Markdown parse stops at ``MARKDOWN_SECONDS`` (a rule markdown-it calls at every position
  checks the clock: some inputs are quadratic in it), a YAML block at ``YAML_SECONDS`` (its loader
  checks the clock as it reads tokens), and the code blocks stop being parsed once the review has
  spent ``REVIEW_SECONDS``; each stop is a finding. JSON and Python are parsed in C, in time linear
  in the block, which the size bound limits.
"""

from __future__ import annotations

import time

MAX_DEPTH = 200  # far beyond any example a person writes; far below the recursion limit (1,000)
MAX_BLOCK_BYTES = 256 * 1024
MARKDOWN_SECONDS = 5.0
YAML_SECONDS = 2.0  # PyYAML is pure Python: some flows cost it seconds per 100 KB
REVIEW_SECONDS = 10.0


class TooComplex(Exception):
    """A parser's bound was reached; the message ends 'to check' and says which bound."""


def nesting_depth(text: str, limit: int = MAX_DEPTH, quotes: str = '"') -> int:
    """The deepest ``[``/``{``/``(`` nesting outside quoted strings, counted up to ``limit + 1``
    (a scan that stops early: the answer past the limit is only 'too deep')."""
    depth = deepest = 0
    quote = ""
    escaped = False
    prev = ""
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in quotes and not prev.isalnum():  # "don't" is a word, not the start of a string
            quote = ch
        elif ch in "[{(":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]})":
            depth = max(0, depth - 1)
        prev = ch
    return deepest


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() > self.at
