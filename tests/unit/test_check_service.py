"""The check service's gate, diff filter and fleet wait (domain/review/checking.py), on fakes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from docllm.domain.review.checking import Checked, CheckError, Source, failing, only_changed, wait_for_reports
from docllm.domain.review.report import finding
from docllm.domain.tasks.model import TaskStatus


def _f(severity: str, start: int | None, end: int | None = None) -> dict:
    return finding("links", severity, "m", line_start=start, line_end=end)


def test_failing_counts_findings_at_or_above_the_threshold():
    results = [Checked(Source("a.md", "a.md", "x"), [_f("low", 1), _f("medium", 2), _f("high", 3)])]
    assert [failing(results, s) for s in ("low", "medium", "high", "critical")] == [3, 2, 1, 0]


def test_only_changed_keeps_findings_touching_a_changed_line():
    a = Checked(Source("a.md", "a.md", "x"), [_f("low", 1), _f("low", 4, 6), _f("low", 9), _f("low", None)])
    b = Checked(Source("b.md", "b.md", "x"), [_f("low", 1)])
    [kept_a, kept_b] = only_changed([a, b], {"a.md": {6}})
    assert [f["location"]["line_start"] for f in kept_a.findings] == [4, None]  # touches 6; no line: file changed
    assert kept_b.findings == []


@dataclass
class Row:
    task_id: int
    status: TaskStatus
    result: dict | None = None
    error: str | None = None


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_the_fleet_wait_reads_the_reports_once_all_are_done():
    clock, calls = Clock(), []
    report = {"findings": [_f("high", 3)], "summary": "s", "reviewer": "offline", "model": "m"}

    def fetch(ids):
        calls.append(clock.t)
        status = TaskStatus.success if clock.t >= 2 else TaskStatus.processing
        return [Row(i, status, report if status is TaskStatus.success else None) for i in ids]

    seen = []
    sources = [Source("a.md", "a.md", "x"), Source("b.docx", "b.docx", "x", file_lines=False)]
    out = wait_for_reports([7, 8], sources, fetch, 60, 0.5, clock.now, clock.sleep, lambda d, t: seen.append((d, t)))
    assert [r.extra["task_id"] for r in out] == [7, 8] and seen[0] == (0, 2) and seen[-1] == (2, 2)
    assert out[0].findings[0]["location"]["line_start"] == 3 and out[1].findings[0]["location"]["line_start"] is None


def test_a_failed_task_or_the_timeout_is_one_error():
    clock = Clock()
    src = [Source("a.md", "a.md", "x")]
    with pytest.raises(CheckError, match="a.md: task 7 failed: boom"):
        wait_for_reports([7], src, lambda ids: [Row(7, TaskStatus.failed, error="boom")], 60, 1, clock.now, clock.sleep)
    with pytest.raises(CheckError, match="1 of 1 task.s. not finished after 5 s .task 7."):
        wait_for_reports([7], src, lambda ids: [Row(7, TaskStatus.pending)], 5, 1, clock.now, clock.sleep)
    assert clock.t == 5
