"""What producers and operators do: submit a task, and retry dead letters."""

from __future__ import annotations

from docllm.domain import events as ev
from docllm.domain.events import NullEvents
from docllm.domain.model import Task, TaskStatus
from docllm.domain.payload import make_payload
from docllm.domain.ports import EventSink, TaskQueue, TaskRepository


def submit(repo: TaskRepository, queue: TaskQueue, task_name: str, document: str,
           max_attempts: int | None = None, events: EventSink | None = None) -> Task:
    """Row first, then payload (as existing producers do); a crash between is the reconciler's."""
    task = repo.create(task_name, document, max_attempts)
    queue.push(make_payload(task.task_id, task.task_name))
    (events or NullEvents()).emit(ev.SUBMITTED, task_id=task.task_id)
    return task


def retry_dead(repo: TaskRepository, queue: TaskQueue, task_id: int | None,
               events: EventSink | None = None) -> list[int]:
    """Operator's retry: reopen failed tasks with a fresh budget and queue them again.

    Dead letters that name no retryable task (malformed, unknown row) stay in the list.
    """
    sink = events or NullEvents()
    letters = queue.dead_letters(limit=1_000_000)
    lettered = {d.task_id for d in letters if d.task_id is not None}
    ids = {task_id} if task_id is not None else lettered
    requeued: list[int] = []
    for tid in sorted(ids):
        row = repo.get(tid)
        if row is None:
            continue
        if row.status is TaskStatus.failed:
            if not repo.reopen(tid):
                continue
        elif not (row.status is TaskStatus.pending and tid in lettered):  # pending: reopened, then crashed
            continue
        queue.remove_dead_letters(tid)
        queue.push(make_payload(tid, row.task_name))
        sink.emit(ev.REOPENED, task_id=tid)
        requeued.append(tid)
    return requeued
