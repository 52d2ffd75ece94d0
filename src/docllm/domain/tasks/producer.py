"""What producers and operators do: submit a task, and retry or discard dead letters."""

from __future__ import annotations

from typing import Protocol

from docllm.domain import events as ev
from docllm.domain.errors import RubricError
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.lanes.model import lane_error, tenant_error
from docllm.domain.review.ports import RubricCatalog
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.payload import payload_of
from docllm.domain.tasks.ports import CancelMarks, Claims, QueueInspection, TaskRepository, TaskStore
from docllm.domain.tasks.storable import lone_surrogate_at
from docllm.domain.tracing import NullTracer, Tracer, running


class RetryQueue(Claims, QueueInspection, CancelMarks, Protocol):
    """The queue roles an operator's retry uses: read and remove dead letters, clear marks, push."""


def submit(
    repo: TaskStore,
    queue: Claims,
    task_name: str,
    document: str,
    max_attempts: int | None = None,
    events: EventSink | None = None,
    rubric: str | None = None,
    rubrics: RubricCatalog | None = None,
    priority: str | None = None,
    tenant: str | None = None,
    tracer: Tracer | None = None,
) -> Task:
    """Row first, then payload (as existing producers do); a crash between is the reconciler's.

    ``rubric`` names the rubric its review follows; it is looked up in ``rubrics`` first, so an
    unknown or invalid one raises RubricError with nothing written or queued. ``priority`` (a lane
    of domain/lanes/model.py) and ``tenant`` go on the row and in the payload; a bad one raises
    ValueError, also with nothing written, as does a name or document no UTF-8 column stores. With
    tracing on, the submit span starts the task's trace: row and payload carry its traceparent."""
    # ``is not None``: an empty name is a value the claim refuses (issue 44), not "the default".
    for reason in (priority is not None and lane_error(priority), tenant is not None and tenant_error(tenant)):
        if reason:
            raise ValueError(reason)
    for what, text in (("task name", task_name), ("document", document)):
        if isinstance(text, str) and (at := lone_surrogate_at(text)) is not None:
            raise ValueError(f"the {what} holds a character no UTF-8 column stores (a lone surrogate at {at})")
    if rubric is not None:
        if rubrics is None:
            raise RubricError(f"rubric {rubric!r}: no rubrics are configured here")
        rubrics.get(rubric)
    with running((tracer or NullTracer()).start("docllm.submit")) as span:
        task = repo.create(task_name, document, max_attempts, rubric, priority, tenant, span.traceparent)
        queue.push(payload_of(task))
        if span.recording:
            span.set({"docllm.task_id": task.task_id})
    (events or NullEvents()).emit(ev.SUBMITTED, task_id=task.task_id)
    return task


def retry_dead(
    repo: TaskRepository, queue: RetryQueue, task_id: int | None, events: EventSink | None = None, page: int = 1000
) -> list[int]:
    """Operator's retry: reopen failed tasks with a fresh budget and queue them again.

    Dead letters that name no retryable task (malformed, unknown row) stay in the list. Linear in
    the dead letters: rows are read a page at a time, and the letters of every reopened task are
    removed in one pass over the list (a pass per task would make ``--all`` quadratic). A crash
    half way leaves rows pending with their letters kept, which the next retry takes up again.
    """
    sink = events or NullEvents()
    letters = queue.dead_letters(limit=1_000_000)
    lettered = {d.task_id for d in letters if d.task_id is not None}
    ids = sorted({task_id} if task_id is not None else lettered)
    reopened: list[Task] = []
    for start in range(0, len(ids), page):
        for row in repo.get_many(ids[start : start + page]):
            if row.status is TaskStatus.failed:
                if not repo.reopen(row.task_id):
                    continue
            elif not (row.status is TaskStatus.pending and row.task_id in lettered):  # reopened, then crashed
                continue
            reopened.append(row)
    if reopened:
        queue.remove_dead_letters([row.task_id for row in reopened])
        queue.clear_cancelled([row.task_id for row in reopened])  # a cancelled task, reopened, runs
    for row in reopened:
        queue.push(payload_of(row))
        sink.emit(ev.REOPENED, task_id=row.task_id)
    return [row.task_id for row in reopened]


def discard_dead(queue: QueueInspection, task_id: int | None, events: EventSink | None = None) -> list[int | None]:
    """Operator's discard: drop the dead letters of one task (or all, with None) and return whose.
    The row keeps its status and error: the task stays on record, and a retry of its id still
    reopens it. Letters that name no task (malformed payloads) go only with ``None``."""
    removed = queue.remove_dead_letters(None if task_id is None else [task_id])
    sink = events or NullEvents()
    for letter in removed:
        sink.emit(ev.DISCARDED, task_id=letter.task_id)
    return [letter.task_id for letter in removed]
