"""The TaskViews role over SQLAlchemy: read-only listings and figures.

Listings (``get_many``, ``recent``, ``search``, ``non_terminal_after``) leave ``document`` out
(None): documents may be megabytes and listings never need them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import case, func, select

from docllm.adapters.sql.repository.base import FAILED, LISTED_ROW, PENDING, PROCESSING, SUCCESS, RepositoryBase
from docllm.adapters.sql.repository.base import task_of as _task
from docllm.adapters.sql.repository.base import tasks_of as _tasks
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.adapters.sql.timestamps import minute_of, utc_ago, utcnow
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import Task, TaskStatus

IN_CHUNK = 500  # ids per IN (...) list


class TaskViewsOps(RepositoryBase):
    def get_many(self, task_ids: Iterable[int]) -> list[Task]:
        ids = sorted(set(task_ids))
        tasks: list[Task] = []
        for i in range(0, len(ids), IN_CHUNK):
            stmt = select(*LISTED_ROW).where(t.c.task_id.in_(ids[i : i + IN_CHUNK])).order_by(t.c.task_id)
            tasks += self._run(partial(_tasks, stmt))
        return tasks

    def recent(self, limit: int = 50) -> list[Task]:
        stmt = select(*LISTED_ROW).order_by(t.c.task_id.desc()).limit(limit)
        return self._run(lambda conn: [_task(r) for r in conn.execute(stmt)])

    def counts(self) -> dict[str, int]:
        stmt = select(t.c.status, func.count()).group_by(t.c.status)
        found = dict(self._run(lambda conn: conn.execute(stmt).all()))
        return {s.value: 0 for s in TaskStatus} | found

    def usage_totals(self, window_s: int = 3600) -> tuple[Usage, Usage]:
        """One aggregate over the table (a scan: for ``docllm stats``, not a hot path)."""
        recent = t.c.updated_at >= utc_ago(window_s)
        sums = [
            t.c.llm_calls,
            t.c.prompt_tokens,
            t.c.completion_tokens,
            t.c.llm_seconds,
            t.c.cost_usd,
            t.c.cached_tokens,
        ]
        stmt = select(*(func.sum(c) for c in sums), *(func.sum(case((recent, c), else_=None)) for c in sums)).where(
            t.c.llm_calls.is_not(None)
        )
        row = self._run(lambda conn: conn.execute(stmt).one())
        return _usage_sum(row[: len(sums)]), _usage_sum(row[len(sums) :])

    def search(self, status: TaskStatus | None = None, name_contains: str = "", limit: int = 50) -> list[Task]:
        stmt = select(*LISTED_ROW).order_by(t.c.task_id.desc()).limit(limit)
        if status is not None:
            stmt = stmt.where(t.c.status == status.value)
        if name_contains:
            stmt = stmt.where(t.c.task_name.contains(name_contains, autoescape=True))
        return self._run(partial(_tasks, stmt))

    def finished_per_minute(self, minutes: int) -> dict[str, list[int]]:
        """Grouped by the database (at most 2 x ``minutes`` rows back). Ended rows are not written
        again until an operator reopens them, so ``updated_at`` is their end: the range is one of
        the (status, updated_at) index per status, not a scan of the table."""

        def work(conn):
            now = conn.execute(select(utcnow())).scalar_one().replace(second=0, microsecond=0)
            since = now - timedelta(minutes=minutes - 1)
            minute = minute_of(t.c.finished_at)
            stmt = (
                select(t.c.status, minute, func.count())
                .where(t.c.status.in_((SUCCESS.value, FAILED.value)), t.c.updated_at >= since)
                .group_by(t.c.status, minute)
            )
            return now, conn.execute(stmt).all()

        now, rows = self._run(work)
        counts = {SUCCESS.value: [0] * minutes, FAILED.value: [0] * minutes}
        for status, at, n in rows:
            if at is None:
                continue
            ago = int((now.replace(tzinfo=None) - datetime.strptime(at, "%Y-%m-%d %H:%M")).total_seconds() // 60)
            if 0 <= ago < minutes:
                counts[status][minutes - 1 - ago] += n
        return counts

    def non_terminal_after(self, cursor: tuple[Any, int] | None, limit: int) -> list[Task]:
        def work(conn):
            pages = (conn.execute(non_terminal_page(s, cursor, limit)) for s in (PENDING, PROCESSING))
            return [_task(row) for page in pages for row in page]

        return sorted(self._run(work), key=lambda task: (task.updated_at, task.task_id))[:limit]


def non_terminal_page(status: TaskStatus, cursor: tuple[Any, int] | None, limit: int):
    """Rows of one status after ``cursor``, in (updated_at, task_id) order.

    A range of the (status, updated_at) index, already in that order (InnoDB and SQLite index
    entries end with the primary key): no sort, no more than ``limit`` rows read (D8).
    """
    stmt = select(*LISTED_ROW).where(t.c.status == status.value)
    if cursor is not None:
        at, after_id = cursor
        stmt = stmt.where(t.c.updated_at >= at, (t.c.updated_at > at) | (t.c.task_id > after_id))
    return stmt.order_by(t.c.updated_at, t.c.task_id).limit(limit)


def _usage_sum(values: Any) -> Usage:
    calls, prompt, completion, seconds, cost, cached = values
    return Usage(
        calls=int(calls or 0),
        prompt_tokens=int(prompt or 0),
        completion_tokens=int(completion or 0),
        llm_seconds=float(seconds or 0.0),
        cost_usd=None if cost is None else float(cost),
        cached_tokens=int(cached or 0),
    )
