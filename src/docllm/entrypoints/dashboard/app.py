"""The dashboard's pages and actions over the same ports and services as the CLI.

``create_app`` takes what it shows as arguments (``Sources``), so tests pass real adapters or
fakes and the app never sees the container (``wiring.build_app`` does that).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, abort, flash, redirect, render_template, request, url_for
from werkzeug.routing import BaseConverter, ValidationError

from docllm.domain.batches.ports import BatchStore
from docllm.domain.events import EventSink
from docllm.domain.marks.model import REASONS, Mark
from docllm.domain.marks.ports import MarkStore
from docllm.domain.marks.service import Judgements
from docllm.domain.review.report import SEVERITIES
from docllm.domain.tasks.cancel import Canceller
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.ports import DashboardSessions, TaskQueue, TaskRepository, WorkerRegistry
from docllm.domain.tasks.producer import discard_dead, retry_dead
from docllm.entrypoints import batch_view, lane_view
from docllm.entrypoints.dashboard import security
from docllm.entrypoints.dashboard.batch_pages import add_batch_pages
from docllm.entrypoints.dashboard.chart import throughput_svg
from docllm.entrypoints.dashboard.finding_actions import add_finding_actions, finding_counts
from docllm.entrypoints.dashboard.redirects import safe_next
from docllm.entrypoints.task_ids import BadTaskId, parse_task_id
from docllm.entrypoints.views import printable, task_json

HERE = Path(__file__).resolve().parent
CHART_MINUTES = 60
LIST_LIMIT = 200


class TaskIdConverter(BaseConverter):
    """``<task_id:...>``: the CLI's check of a task id; a URL that holds no id matches no route (404)."""

    def to_python(self, value: str) -> int:
        try:
            return parse_task_id(value)
        except BadTaskId:
            raise ValidationError() from None


@dataclass
class Sources:
    repository: TaskRepository
    queue: TaskQueue
    stats: Callable[[], dict[str, Any]]  # what `docllm stats --json` prints
    registry: WorkerRegistry | None = None  # None: this build keeps no worker registry
    events: EventSink | None = None
    refresh_seconds: float = 2.0
    batches: BatchStore | None = None  # the provider batches (issue 28); None: this build keeps none
    sessions: DashboardSessions | None = None  # the server's side of sessions; needed with a token
    marks: MarkStore | None = None  # findings a person judged (issue 46); None: this build keeps none


def create_app(src: Sources, token: str = "", access: security.Access | None = None) -> Flask:
    """``access``: the guards the settings give; ``token`` alone for the rest at their defaults."""
    access = access or security.Access(token=token)
    app = Flask("docllm.dashboard", root_path=str(HERE))
    app.url_map.converters["task_id"] = TaskIdConverter
    guard = security.install(app, access, src.sessions, src.queue.now_ms)
    _add_template_helpers(app, src)
    _add_probe(app)
    _add_status_pages(app, src)
    _add_task_pages(app, src)
    add_finding_actions(app, src)
    _add_dead_letter_pages(app, src)
    add_batch_pages(app, src)
    _add_login(app, guard)
    _add_error_pages(app)
    return app


def _add_probe(app: Flask) -> None:
    """``/healthz``: the kubelet's probe of ``docllm dashboard``, answered without the token, the
    HTTPS rule, the host rule or a session (so without Redis: an outage is no reason to restart)."""

    @app.get(security.PROBE_PATH)
    def healthz() -> Any:
        return "ok\n", 200, {"Content-Type": "text/plain; charset=utf-8"}


def _add_template_helpers(app: Flask, src: Sources) -> None:
    app.jinja_env.globals.update(refresh_ms=int(src.refresh_seconds * 1000), statuses=[s.value for s in TaskStatus])
    app.jinja_env.filters["when"] = lambda v: v.strftime("%Y-%m-%d %H:%M:%S UTC") if v else "-"
    app.jinja_env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)


def _add_status_pages(app: Flask, src: Sources) -> None:
    """The overview, the live workers and the LLM's state."""

    @app.get("/")
    def overview() -> str:
        stats = src.stats()
        chart = throughput_svg(src.repository.finished_per_minute(CHART_MINUTES))
        return render_template(
            "overview.html", stats=stats, chart=chart, llm=stats.get("llm"), lane_columns=lane_view.COLUMNS
        )

    @app.get("/workers")
    def workers() -> str:
        live = src.registry.live() if src.registry else None
        return render_template("workers.html", workers=live, now_s=src.queue.now_ms() / 1000)

    @app.get("/llm")
    def llm() -> str:
        return render_template("llm.html", llm=src.stats().get("llm"))


def _add_task_pages(app: Flask, src: Sources) -> None:
    """The task list, one task's page and its cancel button."""

    @app.get("/tasks")
    def tasks() -> str:
        status = request.args.get("status") or None
        if status not in (None, *TaskStatus.__members__):
            abort(400, f"unknown status {status!r}")
        q = request.args.get("q", "").strip()
        rows = src.repository.search(TaskStatus(status) if status else None, q, LIST_LIMIT)
        counts = finding_counts(rows, src.marks)
        return render_template("tasks.html", tasks=rows, status=status or "", q=q, findings=counts.get)

    @app.get("/tasks/<task_id:task_id>")
    def task(task_id: int) -> str:
        row = src.repository.get(task_id)
        if row is None:
            abort(404, f"no task with id {task_id}")
        letters = [d for d in src.queue.dead_letters(limit=1000) if d.task_id == task_id]
        running = [
            (w, f) for w in (src.registry.live() if src.registry else []) for f in w.in_flight if f.task_id == task_id
        ]
        marks = Judgements(src.repository, src.marks).of_task(row) if src.marks is not None else {}
        return render_template(
            "task.html",
            task=row,
            report=_report(row, marks),
            judging=src.marks is not None,
            reasons=REASONS,
            letters=letters,
            running=running,
            as_json=task_json(row),
            now_ms=src.queue.now_ms(),
            batches=batch_view.task_batches_json(src.batches, task_id) if src.batches is not None else [],
        )

    @app.post("/tasks/<task_id:task_id>/cancel")
    def task_cancel(task_id: int) -> Any:
        # As `docllm cancel --wait 0`: a running task is marked, and its worker stops it.
        [done] = Canceller(src.repository, src.queue, src.events).request([task_id])
        flash(f"task {task_id}: {done.detail}")
        return redirect(url_for("task", task_id=task_id))


def _add_dead_letter_pages(app: Flask, src: Sources) -> None:
    """The dead-letter list with retry and discard, one or all."""

    @app.get("/dead")
    def dead() -> str:
        letters = src.queue.dead_letters(limit=LIST_LIMIT)
        return render_template("dead.html", letters=letters, printable=printable, now_ms=src.queue.now_ms())

    @app.post("/dead/<task_id:task_id>/retry")
    def dead_retry(task_id: int) -> Any:
        ids = retry_dead(src.repository, src.queue, task_id, src.events)
        flash(f"requeued task {task_id}" if ids else f"task {task_id} is not failed: nothing to retry")
        return redirect(url_for("dead"))

    @app.post("/dead/retry-all")
    def dead_retry_all() -> Any:
        ids = retry_dead(src.repository, src.queue, None, src.events)
        flash(f"requeued {len(ids)} task(s)")
        return redirect(url_for("dead"))

    @app.post("/dead/<task_id:task_id>/discard")
    def dead_discard(task_id: int) -> Any:
        removed = discard_dead(src.queue, task_id, src.events)
        flash(f"discarded {len(removed)} dead letter(s) of task {task_id}")
        return redirect(url_for("dead"))


def _add_login(app: Flask, guard: security.Guard) -> None:
    """The login form and logout; without a token there is nothing to log into."""

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        if not guard.access.token:
            return redirect(url_for("overview"))
        if request.method == "POST":
            if guard.check_token(request.form.get("token")):
                guard.begin()
                return redirect(safe_next(request.args.get("next")))
            return render_template("login.html", error="wrong token"), 401
        return render_template("login.html", error=None)

    @app.post("/logout")
    def logout() -> Any:
        guard.end_all()  # every session of the fleet: a copy of this cookie is refused from now on
        return redirect(url_for("login"))


def _add_error_pages(app: Flask) -> None:
    @app.errorhandler(400)
    @app.errorhandler(401)
    @app.errorhandler(403)
    @app.errorhandler(404)
    @app.errorhandler(405)
    @app.errorhandler(429)
    @app.errorhandler(503)
    def error(exc: Any) -> Any:
        return render_template("error.html", code=exc.code, message=exc.description), exc.code


def _report(task: Task, marks: dict[int, Mark]) -> dict[str, Any] | None:
    """A report's findings grouped by severity, worst first, each with its number (its place in
    the report, as ``docllm show`` numbers it); those a person dismissed apart, with their mark.
    None when the result is no report (rows of the original deployment hold any text: shown as it is)."""
    result = task.result
    if not isinstance(result, dict) or not isinstance(result.get("findings"), list):
        return None
    groups: dict[str, list[tuple[int, dict[str, Any]]]] = {s: [] for s in reversed(SEVERITIES)}
    dismissed = []
    for n, f in enumerate(result["findings"], 1):
        if isinstance(f, dict) and n in marks:
            dismissed.append((n, f, marks[n]))
        elif isinstance(f, dict):
            groups.setdefault(str(f.get("severity", "other")), []).append((n, f))
    return {
        "groups": {s: fs for s, fs in groups.items() if fs},
        "dismissed": dismissed,
        "total": len(result["findings"]),
        "raw": result,
    }
