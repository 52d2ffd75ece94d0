"""Fenced JSON, YAML and Python blocks must parse: readers copy them as they are."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Collection, Iterator
from typing import Any

import yaml

from docllm.adapters.offline.checks.bounds import (
    MAX_BLOCK_BYTES,
    MAX_DEPTH,
    YAML_SECONDS,
    Deadline,
    TooComplex,
    nesting_depth,
)
from docllm.adapters.offline.checks.document import Doc


def _json(body: str) -> tuple[str, int] | None:
    _shallow(body, '"')
    try:
        json.loads(body)
    except json.JSONDecodeError as e:
        return f"{e.msg} (line {e.lineno} column {e.colno})", e.lineno
    return None


class _TimedLoader(yaml.SafeLoader):
    """SafeLoader that gives up past its deadline: the parser asks for a token at every step."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._deadline = Deadline(YAML_SECONDS)
        self._steps = 0

    def check_token(self, *choices: Any) -> bool:
        self._steps += 1
        if self._steps % 512 == 0 and self._deadline.passed():
            raise TooComplex(f"too slow to parse (over {YAML_SECONDS:g} s): too complex to check")
        return bool(super().check_token(*choices))


def _yaml(body: str) -> tuple[str, int] | None:
    _shallow(body, "\"'")  # a flow's depth; a block's needs indentation the size bound limits
    try:
        loader = _TimedLoader(body)
        try:
            while loader.check_data():
                loader.get_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        return f"{getattr(e, 'problem', None) or 'invalid YAML'} (line {line})", line
    return None


def _python(body: str) -> tuple[str, int] | None:
    if body.lstrip().startswith(">>>"):
        return None  # an interactive session, not a program
    _shallow(body, "\"'")
    try:
        ast.parse(body)
    except SyntaxError as e:
        return f"{e.msg} (line {e.lineno})", e.lineno or 1
    return None


def _shallow(body: str, quotes: str) -> None:
    if len(body.encode()) > MAX_BLOCK_BYTES:
        raise TooComplex(f"over {MAX_BLOCK_BYTES // 1024} KiB: too large to check")
    if nesting_depth(body, MAX_DEPTH, quotes) > MAX_DEPTH:
        raise TooComplex(f"nested over {MAX_DEPTH} levels deep: too deeply nested to check")


def _bounded(parse: Callable[[str], tuple[str, int] | None], body: str) -> tuple[str, int] | None:
    """The parser's answer, or TooComplex when it gave up on its own limits (CPython's parser stack
    is a MemoryError, a recursive parser's a RecursionError): the scan above missed a shape."""
    try:
        return parse(body)
    except (RecursionError, MemoryError):
        raise TooComplex("too deeply nested to check") from None


PARSERS: dict[str, tuple[str, Callable[[str], tuple[str, int] | None]]] = {
    "json": ("JSON", _json),
    "yaml": ("YAML", _yaml),
    "yml": ("YAML", _yaml),
    "python": ("Python", _python),
    "py": ("Python", _python),
    "python3": ("Python", _python),
}


def unparsable_code(doc: Doc, languages: Collection[str] | None = None) -> Iterator[dict[str, Any]]:
    """``languages``: those to parse ("json", "yaml", "python"; a rubric's choice); None: all three."""
    for fence in doc.outline.fences:
        kind = PARSERS.get(fence.language)
        if kind is not None and languages is not None and kind[0].lower() not in languages:
            continue
        if fence.end is None or kind is None or not fence.body.strip():
            continue
        name, parse = kind
        if doc.deadline.passed():
            yield doc.finding(
                "code",
                "low",
                f"Code blocks from here on were not parsed: the review's {doc.deadline.seconds:.0f} s ran out.",
                fence.start,
                suggestion="Split the document, or check its code blocks with their own tools.",
            )
            return
        try:
            problem = _bounded(parse, fence.body)
        except TooComplex as exc:
            yield doc.finding(
                "code",
                "medium",
                f"This {name} block is {exc}.",
                fence.start,
                quote=fence.body[:80],
                suggestion=f"Shorten the {name} example; readers cannot follow it either.",
            )
            continue
        if problem:
            reason, line = problem
            at = min(fence.start + max(line, 1), fence.end - 1)
            yield doc.finding(
                "code",
                "medium",
                f"This {name} block does not parse: {reason}.",
                at,
                suggestion=f"Fix the {name} so that readers can copy it as it is.",
            )
