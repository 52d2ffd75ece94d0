"""The reconciler: rows that Redis forgot (D10) go back to ready.

At a low rate it walks the pending/processing rows in (updated_at, task_id) order, a batch per
cycle, and the queue's structures (delayed, ready, leases) a page per cycle. A row is a suspect
from the first cycle that sees it; a page of the structures that names it clears it. A suspect
that is still unchanged at least ``grace`` later, after a whole lap of the structures that began
after it was first seen, is pushed back to ready; a processing row is first returned to pending,
fenced on its attempt. A false alarm (a payload that moved against the scan's flow while it was
read) costs only a duplicate delivery, which the fencing recognises.

What a cycle costs does not grow with the queue (a long backlog must not make every cycle slower):
one batch of rows and one page of the structures, and with ``lead_ms`` only the one process that
holds the fleet's reconciler lease does even that. The time to notice a lost row is max(grace, two
laps of the structures).

Each cycle first runs the leftover sweep when it is given one (``leftovers.py``): payloads it puts
back in ready are then referenced, so this cycle does not push a second copy of them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from docllm.domain import events as ev
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.tasks.leftovers import LeftoverSweep
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.payload import payload_of
from docllm.domain.tasks.ports import Claims, Clock, Leadership, QueueScan, TaskRepository
from docllm.domain.tracing import NullTracer, Tracer

RECOVERED = "recovered by the reconciler: no Redis structure referred to the task"


@dataclass
class _Suspect:
    since_ms: int
    key: tuple[Any, ...]
    clear_after_lap: int  # the structure lap that must have ended without naming the task
    table_lap: int  # the last lap of the rows that saw it, to forget rows that ended


class ReconcilerQueue(Claims, QueueScan, Leadership, Protocol):
    """The queue roles the reconciler uses: lead, scan every payload, push a lost task again."""


class Reconciler:
    def __init__(
        self,
        queue: ReconcilerQueue,
        repo: TaskRepository,
        clock: Clock,
        grace_ms: int,
        batch: int = 1000,
        events: EventSink | None = None,
        leftovers: LeftoverSweep | None = None,
        scan_page: int = 10_000,
        lead_ms: int | None = None,
        worker_id: str | None = None,
        tracer: Tracer | None = None,
    ):
        self.queue, self.repo, self.clock, self.leftovers = queue, repo, clock, leftovers
        self.grace_ms, self.batch, self.scan_page, self.lead_ms = grace_ms, batch, scan_page, lead_ms
        self.worker_id = worker_id or f"reconciler-{uuid.uuid4().hex[:12]}"
        self.events = events or NullEvents()
        self.tracer = tracer or NullTracer()
        self._cursor: tuple[Any, int] | None = None  # in the rows
        self._scan: Any = None  # in the structures; None: the next page starts a lap
        self._laps = 0  # structure laps ended
        self._table_laps = 0
        self._suspects: dict[int, _Suspect] = {}

    def reconcile_once(self) -> int:
        if self.lead_ms is not None and not self.queue.lead("reconciler", self.worker_id, self.lead_ms):
            return 0  # another process reconciles for the fleet
        if self.leftovers is not None:
            self.leftovers.sweep_once()
        rows = self.repo.non_terminal_after(self._cursor, self.batch)
        # Walk the table a batch per cycle and wrap around at its end.
        wrapped = len(rows) < self.batch
        self._cursor = None if wrapped else (rows[-1].updated_at, rows[-1].task_id)
        if not rows and not self._suspects:
            return 0  # nothing unfinished: no need to read Redis
        self._scan_step()
        now = self.clock.now_ms()
        recovered = sum(1 for row in rows if self._overdue(row, now) and self._recover(row))
        if wrapped:
            self._forget_rows_not_seen_in_the_lap()
        return recovered

    def _scan_step(self) -> None:
        named, self._scan = self.queue.referenced_page(self._scan, self.scan_page)
        for task_id in named:
            self._suspects.pop(task_id, None)
        if self._scan is None:
            self._laps += 1

    def _overdue(self, row: Task, now: int) -> bool:
        key = (row.status, row.attempt, row.retry_count)
        seen = self._suspects.get(row.task_id)
        if seen is None or seen.key != key:
            # A lap in progress may have passed the task's payload already: the next one counts.
            need = self._laps + (1 if self._scan is None else 2)
            self._suspects[row.task_id] = _Suspect(now, key, need, self._table_laps)
            return False
        seen.table_lap = self._table_laps
        seen.since_ms = min(seen.since_ms, now)  # the authority's clock stepped back: count from now
        return now - seen.since_ms >= self.grace_ms and self._laps >= seen.clear_after_lap

    def _forget_rows_not_seen_in_the_lap(self) -> None:
        # A row that became terminal (or was deleted) is never in a batch again.
        self._suspects = {tid: s for tid, s in self._suspects.items() if s.table_lap == self._table_laps}
        self._table_laps += 1

    def _recover(self, row: Task) -> bool:
        self._suspects.pop(row.task_id, None)
        if row.status is TaskStatus.processing and not self.repo.hand_back(row.task_id, row.attempt, RECOVERED):
            return False  # the row moved on meanwhile: it is alive
        # The row's payload: its own lane and tenant, and its trace context (the next attempt continues it).
        self.queue.push(payload_of(row))
        self.events.emit(ev.RECONCILED, task_id=row.task_id, status=row.status.value)
        span = self.tracer.start("docllm.reconcile", link=row.traceparent)
        if span.recording:
            span.set(
                {"docllm.task_id": row.task_id, "docllm.row_status": row.status.value, "docllm.worker": self.worker_id}
            )
            span.end()
        return True
