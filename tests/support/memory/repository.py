"""``TaskRepository`` in memory: the same semantics as the SQL adapter, for unit and property tests.

Imports no database library. Timestamps come from an injected ``Clock`` (authority milliseconds)
or, without one, from a counter that ticks one millisecond per write, so ordering by
(updated_at, task_id) behaves as on the database. Datetimes are aware UTC, as the SQL adapter's.
Listing methods leave ``document`` out (None), as the SQL adapter does.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from docllm.domain.lanes.figures import (
    OTHERS,
    Kind,
    LaneFigures,
    Tally,
    checked_top,
    lane_of,
    top_tenants_order,
    wait_bucket,
)
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import (
    FencedWrite,
    GroupOutcome,
    StartOutcome,
    StartRequest,
    StartResult,
    Task,
    TaskStatus,
)
from docllm.domain.tasks.ports import Clock
from docllm.domain.tasks.store_groups import one_at_a_time

PENDING, PROCESSING, SUCCESS, FAILED = TaskStatus
COUNTER_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
NOW = object()  # a value that stands for "the time of this write", as the SQL utcnow()


class InMemoryTaskRepository:
    def __init__(self, clock: Clock | None = None, default_max_attempts: int | None = None):
        self._clock = clock
        self._default_max_attempts = default_max_attempts
        self._ticks = itertools.count(1)
        self._ids = itertools.count(1)
        self._rows: dict[int, Task] = {}
        self._lock = threading.Lock()

    def _now(self) -> datetime:
        if self._clock is not None:
            return datetime.fromtimestamp(self._clock.now_ms() / 1000, tz=UTC)
        return COUNTER_EPOCH + timedelta(milliseconds=next(self._ticks))

    def _update(self, task_id: int, when: Callable[[Task], bool], **values: Any) -> Task | None:
        """The in-memory conditional UPDATE: apply ``values`` (callables get the row) when ``when(row)``."""
        with self._lock:
            row = self._rows.get(task_id)
            if row is None or not when(row):
                return None
            now = self._now()
            values = {k: now if v is NOW else v(row) if callable(v) else v for k, v in values.items()}
            self._rows[task_id] = replace(row, updated_at=now, **values)
            return copy.deepcopy(self._rows[task_id])

    def _fenced(self, task_id: int, attempt: int, to: TaskStatus, usage: Usage | None, **values: Any) -> bool:
        held = lambda r: r.attempt == attempt and r.status == PROCESSING  # noqa: E731
        if usage is not None and usage.calls:
            values["usage"] = lambda r: usage if r.usage is None else r.usage + usage
        return self._update(task_id, held, status=to, **values) is not None

    # -- reads ------------------------------------------------------------------------------

    def get(self, task_id: int) -> Task | None:
        with self._lock:
            return copy.deepcopy(self._rows.get(task_id))

    def get_many(self, task_ids: Iterable[int]) -> list[Task]:
        with self._lock:
            return [_listed(self._rows[i]) for i in sorted(set(task_ids)) if i in self._rows]

    def recent(self, limit: int = 50) -> list[Task]:
        with self._lock:
            return [_listed(self._rows[i]) for i in sorted(self._rows, reverse=True)[:limit]]

    def counts(self) -> dict[str, int]:
        with self._lock:
            found = {s.value: 0 for s in TaskStatus}
            for row in self._rows.values():
                found[row.status.value] += 1
            return found

    def usage_totals(self, window_s: int = 3600) -> tuple[Usage, Usage]:
        with self._lock:
            since = self._now() - timedelta(seconds=window_s)
            rows = [(r.usage, r.updated_at) for r in self._rows.values() if r.usage is not None]
        every, recent = Usage(), Usage()
        for usage, updated_at in rows:
            assert usage is not None and updated_at is not None
            every += usage
            if updated_at >= since:
                recent += usage
        return _totals(every), _totals(recent)

    def search(self, status: TaskStatus | None = None, name_contains: str = "", limit: int = 50) -> list[Task]:
        needle = name_contains.casefold()
        with self._lock:
            rows = (self._rows[i] for i in sorted(self._rows, reverse=True))
            found = [r for r in rows if status in (None, r.status) and needle in (r.task_name or "").casefold()]
            return [_listed(r) for r in found[:limit]]

    def finished_per_minute(self, minutes: int) -> dict[str, list[int]]:
        now = self._now().replace(second=0, microsecond=0)
        counts = {SUCCESS.value: [0] * minutes, FAILED.value: [0] * minutes}
        with self._lock:
            for row in self._rows.values():
                if row.status.terminal and row.finished_at is not None:
                    ago = int((now - row.finished_at.replace(second=0, microsecond=0)).total_seconds() // 60)
                    if 0 <= ago < minutes:
                        counts[row.status.value][minutes - 1 - ago] += 1
        return counts

    def lane_figures(self, window_s: int, top_tenants: int) -> LaneFigures:
        """The SQL store's selection (lanes.py) over the rows in memory, into the same Tally."""
        top = checked_top(top_tenants)
        now = self._now()
        since = now - timedelta(seconds=window_s)
        with self._lock:
            rows = [r for r in self._rows.values() if not r.status.terminal or (r.updated_at or now) >= since]
        lanes, tenants = Tally(), Tally()
        seen = []
        for r in rows:
            kind = Kind.pending if r.status == PENDING else Kind.processing if r.status == PROCESSING else Kind.finished
            created, started = r.created_at or now, r.processing_started_at
            sampled = r.attempt == 1 and started is not None
            bucket = wait_bucket((started - created).total_seconds()) if started is not None and sampled else None
            age = max(0.0, (now - created).total_seconds())
            lanes.add(lane_of(r.priority), kind, bucket, 1, age)
            tenants.add(r.tenant, kind, bucket, 1, age)
            seen.append((r.tenant, kind, bucket, age))
        working = {r.tenant for r in rows if not r.status.terminal}
        names = [g.name for g in sorted(tenants.groups.values(), key=top_tenants_order)][:top]
        others = Tally()
        for tenant, kind, bucket, age in seen:
            if tenant not in names:
                others.add(OTHERS, kind, bucket, 1, age)
        ranked = tenants.ranked(names)
        return LaneFigures(window_s, lanes.lanes(), ranked, len(working - {None}), others.groups.get(OTHERS))

    def non_terminal_after(self, cursor: tuple[Any, int] | None, limit: int) -> list[Task]:
        with self._lock:
            keys = sorted((r.updated_at, r.task_id) for r in self._rows.values() if not r.status.terminal)
            after = [k for k in keys if cursor is None or k > tuple(cursor)]
            return [_listed(self._rows[task_id]) for _, task_id in after[:limit]]

    # -- writes -----------------------------------------------------------------------------

    def create(
        self,
        task_name: str,
        document: str,
        max_attempts: int | None = None,
        rubric: str | None = None,
        priority: str | None = None,
        tenant: str | None = None,
        traceparent: str | None = None,
    ) -> Task:
        with self._lock:
            now = self._now()
            task = Task(
                task_id=next(self._ids),
                task_name=task_name,
                status=PENDING,
                document=document,
                rubric=rubric,
                priority=priority,
                tenant=tenant,
                traceparent=traceparent,
                max_attempts=self._default_max_attempts if max_attempts is None else max_attempts,
                created_at=now,
                updated_at=now,
            )
            self._rows[task.task_id] = task
            return task

    def start_attempt(self, task_id: int, token: str) -> StartOutcome:
        task = None
        for _ in range(2):  # a second try when the row went back to pending in between
            started = self._update(
                task_id,
                lambda r: r.status == PENDING,
                status=PROCESSING,
                attempt=lambda r: r.attempt + 1,
                lease_token=token,
                processing_started_at=NOW,
                finished_at=None,
            )
            if started is not None:
                return StartOutcome(StartResult.started, started)
            task = self.get(task_id)
            if task is None:
                return StartOutcome(StartResult.missing)
            if task.status != PENDING:
                return StartOutcome.found(task, token)
        return StartOutcome(StartResult.busy, task)

    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        result = copy.deepcopy(result)
        return self._fenced(task_id, attempt, SUCCESS, usage, result=result, error=None, finished_at=NOW)

    def retry(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        return self._to_pending(task_id, attempt, error, usage, retry_count=lambda r: r.retry_count + 1)

    def hand_back(
        self, task_id: int, attempt: int, why: str, usage: Usage | None = None, counted: bool = False
    ) -> bool:
        return self._to_pending(task_id, attempt, why, usage, handbacks=lambda r: r.handbacks + (1 if counted else 0))

    def _to_pending(self, task_id: int, attempt: int, error: str, usage: Usage | None, **count: Any) -> bool:
        return self._fenced(
            task_id, attempt, PENDING, usage, error=error, lease_token=None, processing_started_at=None, **count
        )

    def fail(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        return self._fenced(
            task_id, attempt, FAILED, usage, retry_count=lambda r: r.retry_count + 1, error=error, finished_at=NOW
        )

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        """The reference model of a group: one row at a time, through the methods above."""
        return one_at_a_time(self, writes, starts)

    def reopen(self, task_id: int) -> bool:
        # ``attempt`` is left alone: it is the fencing token and must keep growing.
        changed = self._update(
            task_id,
            lambda r: r.status == FAILED,
            status=PENDING,
            retry_count=0,
            handbacks=0,
            lease_token=None,
            processing_started_at=None,
            finished_at=None,
        )
        return changed is not None

    def cancel_pending(self, task_id: int, attempt: int, error: str) -> bool:
        changed = self._update(
            task_id,
            lambda r: r.status == PENDING and r.attempt == attempt,
            status=FAILED,
            error=error,
            lease_token=None,
            finished_at=NOW,
        )
        return changed is not None

    def delete(self, task_id: int) -> bool:
        with self._lock:
            return self._rows.pop(task_id, None) is not None


def _totals(usage: Usage) -> Usage:
    return replace(usage, model=None)


def _listed(task: Task) -> Task:
    return replace(copy.deepcopy(task), document=None)
