"""The task page's dismiss and restore buttons (issue 46): POSTs, so the dashboard's guards apply
as to every action (the token or loopback only, the session, the CSRF token: security.py); the
rules are the CLI's, in ``domain/marks/service.py``. A refused judgement (a bad reason, a note too
long, a number the report does not have) is a 400 naming why, and nothing is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flask import Flask, abort, flash, redirect, request, url_for

from docllm.domain.errors import DocllmError
from docllm.domain.marks.model import MarkError
from docllm.domain.marks.ports import MarkStore
from docllm.domain.marks.service import Judgements
from docllm.domain.tasks.model import Task

if TYPE_CHECKING:
    from docllm.entrypoints.dashboard.app import Sources


def finding_counts(rows: Sequence[Task], marks: MarkStore | None) -> dict[int, str]:
    """The task list's findings column: ``3``, or ``3 (1 dismissed)``; absent without a report."""
    counted = Judgements.counted(rows, marks)
    return {i: f"{n}" + (f" ({gone} dismissed)" if gone else "") for i, (n, gone) in counted.items()}


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
        except DocllmError as exc:  # the store: not upgraded (run docllm init-db), or down
            abort(503, str(exc))
        flash(f"finding {number} dismissed as {mark.reason}: it stays dismissed on later reviews of {mark.document}")
        return redirect(url_for("task", task_id=task_id))

    @app.post("/tasks/<task_id:task_id>/findings/<int:number>/restore")
    def finding_restore(task_id: int, number: int) -> Any:
        try:
            removed = judgements().restore(task_id, number)
        except MarkError as exc:
            abort(400, str(exc))
        except DocllmError as exc:
            abort(503, str(exc))
        flash(f"finding {number}: " + ("restored, it counts again" if removed else "was not dismissed"))
        return redirect(url_for("task", task_id=task_id))
