"""Judgements: the one way in for ``docllm findings`` and the dashboard's dismiss button. Both
name a finding as the person saw it, task and number (its 1-based place in the report, as ``docllm
show`` numbers it); the mark is kept by the task's document name and the finding's fingerprint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from docllm.domain.marks.golden import GoldenDocument, golden_document, newest_judged
from docllm.domain.marks.model import Mark, MarkError, check_note, check_reason, dismissed, fingerprint, mark_for, match
from docllm.domain.marks.ports import MarkStore
from docllm.domain.tasks.model import Task
from docllm.domain.tasks.ports import TaskLookup

Finding = dict[str, Any]


@dataclass(frozen=True)
class Judged:
    """A report's findings split: those that still count, and those a person dismissed (each with
    its judgement under ``dismissed``)."""

    active: list[Finding]
    dismissed: list[Finding]


def judge(findings: Sequence[Any], marks: Sequence[Mark]) -> Judged:
    """Split ``findings`` by the marks of their document; a finding that is not a dict (an old or
    foreign report) is left active, as it is."""
    found = match(findings, marks)
    active, gone = [], []
    for i, f in enumerate(findings):
        mark = found.get(i)
        if mark is None:
            active.append(f)
        else:
            gone.append(dismissed(f, mark))
    return Judged(active, gone)


def marked_numbers(findings: Sequence[Any], marks: Sequence[Mark]) -> dict[int, Mark]:
    """The 1-based numbers of the findings a mark dismisses, with the mark: a report keeps its
    numbering (``docllm findings dismiss TASK N``) and shows those apart."""
    return {i + 1: m for i, m in match(findings, marks).items()}


class Judgements:
    def __init__(self, tasks: TaskLookup, marks: MarkStore):
        self.tasks, self.marks = tasks, marks

    def dismiss(self, task_id: int, number: int, reason: str, note: str = "", by: str = "") -> Mark:
        """Mark the ``number``-th finding of task ``task_id``; MarkError (nothing written) for a bad
        reason or note, an unknown task, a task without a report, a number out of range."""
        check_reason(reason)
        check_note(note)
        task, finding = self._finding(task_id, number)
        return self.marks.put(
            mark_for(str(task.task_name), finding, reason, note, task_id, number, by, task.tenant or "")
        )

    def restore(self, task_id: int, number: int) -> bool:
        """Take the mark off the finding again (it counts from the next report read); False when
        it had none."""
        task, finding = self._finding(task_id, number)
        return self.marks.remove(task.tenant or "", str(task.task_name), fingerprint(finding))

    def judged(self, document: str | None, findings: Sequence[Any], tenant: str | None = None) -> Judged:
        """A report of the tenant's ``document`` as a person should see it now."""
        if not document:
            return Judged(list(findings), [])
        return judge(findings, self.marks.for_documents([document], tenant or "").get(document, []))

    def of_task(self, task: Task) -> dict[int, Mark]:
        """Which findings of the task's report are dismissed now, by number; {} without a report."""
        findings = task.result.get("findings") if isinstance(task.result, dict) else None
        if not isinstance(findings, list) or not findings or not task.task_name:
            return {}
        marks = self.marks.for_documents([task.task_name], task.tenant or "").get(task.task_name, [])
        return marked_numbers(findings, marks)

    @staticmethod
    def counted(tasks: Sequence[Task], marks: MarkStore | None) -> dict[int, tuple[int, int]]:
        """Per task with a report: (findings, of them dismissed), with one read of the marks per
        tenant among ``tasks`` (a page of the task list)."""
        reports = {
            t.task_id: t.result["findings"]
            for t in tasks
            if isinstance(t.result, dict) and isinstance(t.result.get("findings"), list)
        }
        judged: dict[tuple[str, str], list[Mark]] = {}
        by_tenant: dict[str, set[str]] = {}
        for t in tasks:
            if t.task_id in reports and t.task_name and marks is not None:
                by_tenant.setdefault(t.tenant or "", set()).add(t.task_name)
        for tenant, names in by_tenant.items():
            for name, found in marks.for_documents(names, tenant).items() if marks is not None else ():
                judged[(tenant, name)] = found
        return {
            t.task_id: (
                len(reports[t.task_id]),
                len(marked_numbers(reports[t.task_id], judged.get((t.tenant or "", t.task_name or ""), []))),
            )
            for t in tasks
            if t.task_id in reports
        }

    def golden_set(self, limit: int = 100_000) -> list[GoldenDocument]:
        """Every judged document as a golden case (``golden.py``), in document order; a document
        whose judged tasks are all gone (deleted, or without a report) is left out."""
        by_document: dict[tuple[str, str], list[Mark]] = {}
        for m in self.marks.listed(limit=limit):
            by_document.setdefault((m.tenant, m.document), []).append(m)
        taken: set[str] = set()
        cases = []
        for key in sorted(by_document):
            marks = by_document[key]
            ids = sorted({m.task_id for m in marks if m.task_id is not None})
            task = newest_judged([self.tasks.get(i) for i in ids])
            if task is not None:
                cases.append(golden_document(task, marks, taken))
        return cases

    def _finding(self, task_id: int, number: int) -> tuple[Task, Finding]:
        task = self.tasks.get(task_id)
        if task is None:
            raise MarkError(f"no task with id {task_id}")
        report = task.result
        findings = report.get("findings") if isinstance(report, dict) else None
        if not isinstance(findings, list):
            raise MarkError(f"task {task_id} has no report to judge (it is {task.status.value})")
        if not findings:
            raise MarkError(f"task {task_id}'s report has no finding")
        if not 1 <= number <= len(findings):
            raise MarkError(
                f"task {task_id}'s report has {len(findings)} finding(s): give a number from 1 to "
                f"{len(findings)} (docllm show {task_id})"
            )
        finding = findings[number - 1]
        if not isinstance(finding, dict):
            raise MarkError(f"finding {number} of task {task_id} is not a docllm finding")
        if not task.task_name:
            raise MarkError(f"task {task_id} has no name: marks are kept by the document's name")
        return task, finding
