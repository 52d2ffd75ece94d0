"""Checks of the document's shape: empty sections, heading jumps, duplicate headings, open fences."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from docllm.adapters.offline.checks.document import Doc


def empty_sections(doc: Doc) -> Iterator[dict[str, Any]]:
    headings = doc.outline.headings
    for i, h in enumerate(headings):
        nxt = headings[i + 1] if i + 1 < len(headings) else None
        if nxt is not None and nxt.level > h.level:
            continue  # its content is its subsections
        body = doc.lines[h.line : (nxt.line - 1 if nxt else len(doc.lines))]
        if not any(line.strip() for line in body):
            yield doc.finding(
                "completeness",
                "medium",
                f"Section {h.text!r} is empty.",
                h.line,
                suggestion="Write the section or remove its heading.",
            )


def heading_levels(doc: Doc) -> Iterator[dict[str, Any]]:
    headings = doc.outline.headings
    for prev, h in zip(headings, headings[1:], strict=False):
        if h.level > prev.level + 1:
            yield doc.finding(
                "formatting",
                "low",
                f"Heading level jumps from H{prev.level} to H{h.level}.",
                h.line,
                suggestion=f"Use H{prev.level + 1} here, or add the missing level.",
            )


def duplicate_headings(doc: Doc) -> Iterator[dict[str, Any]]:
    seen: dict[tuple, int] = {}
    for h in doc.outline.headings:
        key = (h.path[:-1], h.text.strip().lower())
        if key in seen:
            yield doc.finding(
                "consistency",
                "low",
                f"Heading {h.text!r} repeats the one on line {seen[key]} under the same parent; "
                "links to it are ambiguous.",
                h.line,
                suggestion="Give each section its own title.",
            )
        else:
            seen[key] = h.line


def unclosed_fences(doc: Doc) -> Iterator[dict[str, Any]]:
    for fence in doc.outline.fences:
        if fence.end is None:
            yield doc.finding(
                "formatting",
                "high",
                "This code fence is never closed: the rest of the document renders as code.",
                fence.start,
                doc.last_line,
                suggestion="Close the block with a matching fence.",
            )
