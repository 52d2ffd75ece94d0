"""Judgements as a golden set for ``docllm eval`` (docs/EVAL.md, docs/FINDINGS.md): each judged
document as the reviewer last saw it (the text of its newest judged task), with expectations from
that task's report. A finding dismissed as a false alarm becomes "no finding here" (an entry of
``false_alarms``: a reviewer that reports it again is counted for it); every other finding of the
report, accepted, won't-fix or not judged, is expected: the team saw the report and left it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from docllm.domain.marks.model import Mark, location_of, match
from docllm.domain.tasks.model import Task

TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".text")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class GoldenDocument:
    file_name: str  # in the set: its stem is unique and has no dot, so NAME.expected.yaml finds it alone
    document: str
    task_id: int
    rubric: str | None
    findings: list[dict[str, Any]] = field(default_factory=list)  # expectations, as the YAML has them
    false_alarms: list[dict[str, Any]] = field(default_factory=list)


def file_name(task_name: str, taken: set[str]) -> str:
    """A file name for the task's text: the stem made safe (no path, no dot), the suffix a text
    one (a PDF's, DOCX's or HTML page's text is the Markdown that was extracted from it)."""
    base = task_name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    stem, dot, suffix = base.rpartition(".")
    if not dot:
        stem, suffix = base, ""
    keep = "." + suffix.lower() if "." + suffix.lower() in TEXT_SUFFIXES and stem else ".md"
    if keep == ".md" and suffix and "." + suffix.lower() not in TEXT_SUFFIXES:
        stem = f"{stem}-{suffix}"  # manual.pdf -> manual-pdf.md
    stem = _UNSAFE.sub("-", stem).strip("-")[:100] or "document"
    name, n = stem, 1
    while name.lower() in taken:
        n += 1
        name = f"{stem}-{n}"
    taken.add(name.lower())
    return name + keep


def _place(f: dict[str, Any]) -> dict[str, Any]:
    loc = location_of(f)
    start, end = loc.get("line_start"), loc.get("line_end")
    if isinstance(start, int) and start >= 1:
        end = end if isinstance(end, int) and end >= start else start
        return {"lines": str(start) if end == start else f"{start}-{end}"}
    return {"section": loc["heading"]} if loc.get("heading") else {}


def expectation(f: dict[str, Any], severity: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"check": f["check"]} if f.get("check") else {}
    entry["category"] = f.get("category") or "other"
    if severity and f.get("severity"):
        entry["severity"] = f["severity"]
    return entry | _place(f)


def golden_document(task: Task, marks: Sequence[Mark], taken: set[str]) -> GoldenDocument:
    """``task``: the newest judged task of its document, with its report; ``marks``: its document's."""
    findings = [f for f in task.result["findings"] if isinstance(f, dict)]
    found = match(findings, marks)
    expected, alarms, matched = [], [], set()
    for i, f in enumerate(findings):
        mark = found.get(i)
        if mark is not None:
            matched.add(mark.fingerprint)
        if mark is not None and mark.reason == "false-alarm":  # by its quote too: exactly this one
            alarms.append(expectation(f, severity=False) | ({"quote": f["quote"]} if f.get("quote") else {}))
        else:
            expected.append(expectation(f))
    for m in marks:  # a false alarm of an earlier version, not in this report: still no finding there
        if m.reason == "false-alarm" and m.fingerprint not in matched and m.heading.strip():
            entry = {"check": m.rule} if m.rule != m.category else {}  # placed by its section: lines moved
            alarms.append(entry | {"category": m.category or "other", "section": m.heading} | _quote_of(m))
    name = file_name(task.task_name or "document", taken)
    return GoldenDocument(name, task.document or "", task.task_id, task.rubric, expected, alarms)


def _quote_of(m: Mark) -> dict[str, str]:
    return {"quote": m.quote} if m.quote and len(m.quote) < 500 else {}  # 500: kept cut, not whole


def newest_judged(tasks: Sequence[Task | None]) -> Task | None:
    """Of the tasks a document's marks were made on, the newest that still has its report and text."""
    usable = [
        t
        for t in tasks
        if t is not None
        and isinstance(t.result, dict)
        and isinstance(t.result.get("findings"), list)
        and (t.document or "").strip()
    ]
    return max(usable, key=lambda t: t.task_id, default=None)
