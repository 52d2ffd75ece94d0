"""Checks of the text itself: unfinished-work markers and sentences too long to follow."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import Any

from docllm.adapters.offline.checks.document import Doc

MAX_SENTENCE_WORDS = 40
_MARKER = re.compile(r"\b(TODO|FIXME|TBD)\b")
_NOT_PROSE = re.compile(r"^\s*(#|\||<|\[[^\]]+\]:|[-*_]{3,}\s*$)")  # headings, tables, HTML, link defs, rules
_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[`*])")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def markers(doc: Doc) -> Iterator[dict[str, Any]]:
    # In code too: a TODO in an example is as unfinished as one in the prose.
    lines = dict(doc.prose()) | {n: doc.lines[n - 1] for n in doc.code}
    for no in sorted(lines):
        m = _MARKER.search(lines[no])
        if m:
            yield doc.finding(
                "completeness",
                "medium",
                f"{m.group(1)} marker: this part is unfinished.",
                no,
                suggestion="Finish the text, or track the work elsewhere and remove the marker.",
            )


def _paragraphs(doc: Doc) -> Iterator[list[tuple[int, str]]]:
    """Runs of prose lines; a list item starts a new run."""
    run: list[tuple[int, str]] = []
    for no, line in doc.prose():
        if not line.strip() or _NOT_PROSE.match(line) or _ITEM.match(line):
            if run:
                yield run
            run = [(no, _ITEM.sub("", line))] if line.strip() and _ITEM.match(line) else []
        else:
            run.append((no, line.strip()))
    if run:
        yield run


def long_sentences(doc: Doc, max_words: int = MAX_SENTENCE_WORDS) -> Iterator[dict[str, Any]]:
    for run in _paragraphs(doc):
        starts, text = [], ""
        for _, line in run:
            starts.append(len(text))
            text += _LINK.sub(r"\1", line) + " "
        at = 0
        for sentence in _SENTENCE_END.split(text):
            at = text.index(sentence, at)
            words = len(sentence.split())
            if words > max_words:
                first = run[bisect.bisect_right(starts, at) - 1][0]
                last = run[bisect.bisect_right(starts, at + len(sentence.rstrip()) - 1) - 1][0]
                yield doc.finding(
                    "clarity",
                    "low",
                    f"This sentence has {words} words.",
                    first,
                    last,
                    quote=sentence.strip(),
                    suggestion="Split it into shorter sentences.",
                )
            at += len(sentence)
