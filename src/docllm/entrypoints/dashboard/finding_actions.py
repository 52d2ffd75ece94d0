"""The task page's dismiss and restore buttons (issue 46): POSTs, so the dashboard's guards apply
as to every action (the token or loopback only, the session, the CSRF token: security.py); the
rules are the CLI's, in ``domain/marks/service.py``. A refused judgement (a bad reason, a note too
long, a number the report does not have) is a 400 naming why, and nothing is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flask import Flask, abort, flash, redirect, request, url_for

from docllm.domain.marks.model import MarkError
from docllm.domain.marks.ports import MarkStore
from docllm.domain.marks.service import Judgements, marked_numbers
from docllm.domain.tasks.model import Task

if TYPE_CHECKING:
    from docllm.entrypoints.dashboard.app import Sources


def finding_counts(rows: Sequence[Task], marks: MarkStore | None) -> dict[int, str]:
    """The task list's findings column: ``3``, or ``3 (1 dismissed)``; absent without a report.
    One read of the marks per tenant on the page."""
    reports = {
        t.task_id: t.result["findings"]
        for t in rows
        if isinstance(t.result, dict) and isinstance(t.result.get("findings"), list)
    }
    judged: dict[tuple[str, str], list[Any]] = {}
    if marks is not None:
        by_tenant: dict[str, set[str]] = {}
        for t in rows:
            if t.task_id in reports and t.task_name:
                by_tenant.setdefault(t.tenant or "", set()).add(t.task_name)
        for tenant, names in by_tenant.items():
            for name, found in marks.for_documents(names, tenant).items():
                judged[(tenant, name)] = found
    counts = {}
    for t in rows:
        if t.task_id in reports:
            findings = reports[t.task_id]
            gone = len(marked_numbers(findings, judged.get((t.tenant or "", t.task_name or ""), [])))
            counts[t.task_id] = f"{len(findings)}" + (f" ({gone} dismissed)" if gone else "")
    return counts


def add_finding_actions(app: Flask, src: Sources) -> None:
    def judgements() -> Judgements:
        if src.marks is None:
            abort(404, "this dashboard keeps no marks")
        return Judgements(src.repository, src.marks)

    @app.post("/tasks/<task_id:task_id>/findings/<int:number>/dismiss")
    def finding_dismiss(task_id: int, number: int) -> Any:
        try:
            mark = judgements().dismiss(
                task_id,
                number,
                request.form.get("reason", ""),
                request.form.get("note", ""),
                by=f"dashboard:{request.remote_addr or '?'}",
            )
        except MarkError as exc:
            abort(400, str(exc))
        flash(f"finding {number} dismissed as {mark.reason}: it stays dismissed on later reviews of {mark.document}")
        return redirect(url_for("task", task_id=task_id))

    @app.post("/tasks/<task_id:task_id>/findings/<int:number>/restore")
    def finding_restore(task_id: int, number: int) -> Any:
        try:
            removed = judgements().restore(task_id, number)
        except MarkError as exc:
            abort(400, str(exc))
        flash(f"finding {number}: " + ("restored, it counts again" if removed else "was not dismissed"))
        return redirect(url_for("task", task_id=task_id))
