"""The reconciler: rows that Redis forgot (D10) go back to ready.

At a low rate it walks the pending/processing rows in (updated_at, task_id) order, a batch per
cycle, and asks the queue which task ids any payload names. A row that no Redis structure names,
seen unchanged twice at least ``grace`` apart (authority clock), is pushed back to ready; a
processing row is first returned to pending, fenced on its attempt. A false alarm (a payload
that moved between structures while they were read) costs only a duplicate delivery, which the
fencing recognises.

Each cycle first runs the leftover sweep when it is given one (``leftovers.py``): payloads it puts
back in ready are then referenced, so this cycle does not push a second copy of them.
"""

from __future__ import annotations

from typing import Any

from docllm.domain import events as ev
from docllm.domain.events import NullEvents
from docllm.domain.model import Task, TaskStatus
from docllm.domain.payload import make_payload
from docllm.domain.ports import Clock, EventSink, TaskQueue, TaskRepository
from docllm.domain.services.leftovers import LeftoverSweep

RECOVERED = "recovered by the reconciler: no Redis structure referred to the task"


class Reconciler:
    def __init__(
        self,
        queue: TaskQueue,
        repo: TaskRepository,
        clock: Clock,
        grace_ms: int,
        batch: int = 1000,
        events: EventSink | None = None,
        leftovers: LeftoverSweep | None = None,
    ):
        self.queue, self.repo, self.clock, self.leftovers = queue, repo, clock, leftovers
        self.grace_ms, self.batch = grace_ms, batch
        self.events = events or NullEvents()
        self._cursor: tuple[Any, int] | None = None
        self._suspects: dict[int, tuple[int, tuple[Any, ...]]] = {}

    def reconcile_once(self) -> int:
        if self.leftovers is not None:
            self.leftovers.sweep_once()
        rows = self.repo.non_terminal_after(self._cursor, self.batch)
        # Walk the table a batch per cycle and wrap around at its end.
        self._cursor = (rows[-1].updated_at, rows[-1].task_id) if len(rows) == self.batch else None
        if not rows:
            return 0
        referenced = self.queue.referenced_task_ids()
        now = self.clock.now_ms()
        recovered = 0
        for row in rows:
            if row.task_id in referenced:
                self._suspects.pop(row.task_id, None)
            elif self._overdue(row, now) and self._recover(row):
                recovered += 1
        return recovered

    def _overdue(self, row: Task, now: int) -> bool:
        key = (row.status, row.attempt, row.retry_count)
        seen = self._suspects.get(row.task_id)
        if seen is None or seen[1] != key:
            self._suspects[row.task_id] = (now, key)
            return False
        return now - seen[0] >= self.grace_ms

    def _recover(self, row: Task) -> bool:
        self._suspects.pop(row.task_id, None)
        if row.status is TaskStatus.processing and not self.repo.retry(
            row.task_id, row.attempt, RECOVERED, count_failure=False
        ):
            return False  # the row moved on meanwhile: it is alive
        self.queue.push(make_payload(row.task_id, row.task_name))
        self.events.emit(ev.RECONCILED, task_id=row.task_id, status=row.status.value)
        return True
