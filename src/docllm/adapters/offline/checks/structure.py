"""Checks of the document's shape: empty sections, heading jumps, duplicate headings, open fences.

The heading-increment and sibling-duplicate checks are markdownlint's MD001 and MD024
(``siblings_only``), rule for rule: docs/EVAL.md has how far they agree, and how it was measured.
"""

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
        body = doc.lines[doc.md.heading_ends.get(h.line, h.line) : (nxt.line - 1 if nxt else len(doc.lines))]
        if not any(line.strip() for line in body):
            yield doc.finding(
                "completeness",
                "medium",
                f"Section {h.text!r} is empty.",
                h.line,
                suggestion="Write the section or remove its heading.",
            )


def heading_levels(doc: Doc) -> Iterator[dict[str, Any]]:
    """MD001: a heading deeper than the one before it is exactly one level deeper (a front matter
    ``title`` counts as the H1)."""
    prev = 1 if doc.md.front_matter_title else None
    for h in doc.outline.headings:
        if prev is not None and h.level > prev + 1:
            yield doc.finding(
                "formatting",
                "low",
                f"Heading level jumps from H{prev} to H{h.level}.",
                h.line,
                suggestion=f"Use H{prev + 1} here, or add the missing level.",
            )
        prev = h.level


def duplicate_headings(doc: Doc) -> Iterator[dict[str, Any]]:
    """MD024 with ``siblings_only``: the same heading text twice among the headings of one parent."""
    known: dict[int, dict[str, int]] = {1: {}}
    last = 1
    for h in doc.outline.headings:
        text = doc.md.raw_titles.get(h.line, h.text)
        while last < h.level:
            last += 1
            known[last] = {}
        while last > h.level:
            known[last] = {}
            last -= 1
        siblings = known[h.level]
        if text in siblings:
            yield doc.finding(
                "consistency",
                "low",
                f"Heading {h.text!r} repeats the one on line {siblings[text]} under the same parent; "
                "links to it are ambiguous.",
                h.line,
                suggestion="Give each section its own title.",
            )
        else:
            siblings[text] = h.line


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


def unreadable(doc: Doc) -> Iterator[dict[str, Any]]:
    """A document whose Markdown reached a parser's bound: said once, so a gate sees what was skipped."""
    if doc.md.unreadable:
        yield doc.finding(
            "formatting",
            "medium",
            f"This document was not checked: {doc.md.unreadable}.",
            1,
            quote="",
            suggestion="Simplify the markup (deep nesting, long runs of brackets or emphasis).",
        )
