"""The operator's cancel (ARCHITECTURE.md, Operator surface): a pending task never runs, a running one stops at
its worker's next heartbeat and commits nothing. Either way the row ends ``failed`` with
``CANCELLED_ERROR``, through a fenced write.

``request`` marks the tasks in Redis first (so an attempt that starts from now on sees the mark
at its start, and one already running sees it at its next heartbeat), then fails every pending
row itself. ``check`` looks again at a task still running: the worker settles it, unless the
worker died and the reaper put the row back to pending, which ``check`` then fails itself.
A payload of a cancelled task left in ready or delayed is acked by the claim that finds the row
terminal, as any duplicate delivery is.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass

from docllm.domain import events as ev
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.outcome import CANCELLED_ERROR
from docllm.domain.tasks.ports import CancelMarks, TaskRepository


class CancelResult(enum.StrEnum):
    cancelled = "cancelled"  # the row is failed with CANCELLED_ERROR
    running = "running"  # marked; its worker stops it at its next heartbeat
    unknown = "unknown"  # no such task
    finished = "finished"  # it ended (success, or failed for another reason) before the cancel


@dataclass(frozen=True)
class Cancel:
    task_id: int
    result: CancelResult
    status: str | None = None  # the row's status as last read
    late: bool = False  # ``finished`` after the mark was set: it ended before its worker saw it

    @property
    def done(self) -> bool:
        return self.result is not CancelResult.running

    @property
    def detail(self) -> str:
        return {
            CancelResult.cancelled: CANCELLED_ERROR,
            CancelResult.running: "running: its worker stops it at its next heartbeat",
            CancelResult.unknown: "no task with this id",
            CancelResult.finished: f"ended {self.status} before the cancel took effect"
            if self.late
            else f"already {self.status}: nothing to cancel",
        }[self.result]


class Canceller:
    def __init__(self, repo: TaskRepository, queue: CancelMarks, events: EventSink | None = None, tries: int = 5):
        self.repo, self.queue, self.events, self.tries = repo, queue, events or NullEvents(), tries

    def request(self, task_ids: Collection[int]) -> list[Cancel]:
        ids = sorted(set(task_ids))
        rows = {row.task_id: row for row in self.repo.get_many(ids)}
        live = [t for t in ids if t in rows and not rows[t].status.terminal]
        self.queue.mark_cancelled(live)
        return [self._settle(t, rows.get(t), fresh=True) for t in ids]

    def check(self, cancel: Cancel) -> Cancel:
        """A task reported ``running``, looked at again."""
        return self._settle(cancel.task_id, self.repo.get(cancel.task_id), fresh=False)

    def _settle(self, task_id: int, row: Task | None, fresh: bool) -> Cancel:
        for _ in range(self.tries):  # each turn: the row moved between our read and our write
            if row is None:
                return Cancel(task_id, CancelResult.unknown)
            if row.status is TaskStatus.processing:
                if not fresh:  # again: Redis may have lost the mark (a restart without AOF, a failover)
                    self.queue.mark_cancelled([task_id])
                return Cancel(task_id, CancelResult.running, row.status.value)
            if row.status.terminal:
                if row.status is TaskStatus.failed and row.error == CANCELLED_ERROR and not fresh:
                    return Cancel(task_id, CancelResult.cancelled, row.status.value)
                if not fresh:  # it ended before its worker saw the mark: the mark has no more use
                    self.queue.clear_cancelled([task_id])
                return Cancel(task_id, CancelResult.finished, row.status.value, late=not fresh)
            if self.repo.cancel_pending(task_id, row.attempt, CANCELLED_ERROR):
                self.queue.clear_cancelled([task_id])
                self.events.emit(ev.CANCELLED, task_id=task_id, attempt=row.attempt, worker="operator")
                return Cancel(task_id, CancelResult.cancelled, TaskStatus.failed.value)
            row, fresh = self.repo.get(task_id), False
        return Cancel(task_id, CancelResult.running, row.status.value if row else None)
