"""``TaskRepository`` over SQLAlchemy Core: MySQL/MariaDB in production, SQLite embedded.

Every write of an attempt is one conditional UPDATE fenced on ``attempt`` and ``status`` with a
rowcount check: the database decides, nothing is read, changed and written back in Python.
Timestamps come from the database's ``utcnow()``; they are returned as aware UTC datetimes.
Listing methods (``get_many``, ``recent``, ``non_terminal_after``) leave ``document`` out
(None): documents may be megabytes and listings never need them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Double,
    Integer,
    String,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine

from docllm.adapters.sql.engine import TransientRetry
from docllm.adapters.sql.schema import USAGE_COLUMNS
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.adapters.sql.timestamps import minute_of, utc_ago, utcnow
from docllm.domain.errors import Unavailable
from docllm.domain.model import StartOutcome, StartResult, Task, TaskStatus
from docllm.domain.usage import Usage

PENDING, PROCESSING, SUCCESS, FAILED = TaskStatus
FULL_ROW = tuple(t.c)
LISTED_ROW = tuple(c for c in t.c if c.name != "document")
IN_CHUNK = 500  # ids per IN (...) list

# The statements of an attempt's hot path, built once: building one per call and deriving its
# compile-cache key again each time was the largest share of the worker's CPU (docs/BENCHMARKS.md).
# Bind names start with b_ so that they never clash with the column names of a SET clause.
GET_ROW = select(*FULL_ROW).where(t.c.task_id == bindparam("b_task_id"))
START_ATTEMPT = (
    update(t)
    .where(t.c.task_id == bindparam("b_task_id"), t.c.status == PENDING.value)
    .values(
        status=PROCESSING.value,
        attempt=t.c.attempt + 1,
        lease_token=bindparam("b_token"),
        processing_started_at=utcnow(),
        finished_at=None,
        updated_at=utcnow(),
    )
)


def _summed(column, kind):
    """``column`` plus a bound value, where either may be NULL: NULL + x is x, c + NULL is c."""
    added = bindparam(f"b_{column.name}", type_=kind)
    return func.coalesce(column + added, column, added)


# An attempt's LLM usage, added to the row's in the same UPDATE as its outcome (NULLs bound: unchanged).
USAGE_SUM = {
    "llm_calls": _summed(t.c.llm_calls, Integer()),
    "prompt_tokens": _summed(t.c.prompt_tokens, BigInteger()),
    "completion_tokens": _summed(t.c.completion_tokens, BigInteger()),
    "llm_seconds": _summed(t.c.llm_seconds, Double()),
    "cost_usd": _summed(t.c.cost_usd, Double()),
    "llm_model": func.coalesce(bindparam("b_llm_model", type_=String()), t.c.llm_model),
}
COMMIT_ATTEMPT = (
    update(t)
    .where(t.c.task_id == bindparam("b_task_id"), t.c.attempt == bindparam("b_attempt"), t.c.status == PROCESSING.value)
    .values(
        status=SUCCESS.value,
        updated_at=utcnow(),
        result=bindparam("b_result", type_=t.c.result.type),
        error=None,
        finished_at=utcnow(),
        **USAGE_SUM,
    )
)


def usage_params(usage: Usage | None) -> dict[str, Any]:
    if usage is None or not usage.calls:
        return {f"b_{name}": None for name in USAGE_COLUMNS}
    return {
        "b_llm_calls": usage.calls,
        "b_prompt_tokens": usage.prompt_tokens,
        "b_completion_tokens": usage.completion_tokens,
        "b_llm_seconds": round(usage.llm_seconds, 3),
        "b_cost_usd": usage.cost_usd,
        "b_llm_model": usage.model,
    }


def _task(row) -> Task:
    values = row._asdict()
    values["status"] = TaskStatus(values["status"])
    usage = {name: values.pop(name) for name in USAGE_COLUMNS}
    if usage["llm_calls"] is not None:
        values["usage"] = Usage(
            calls=usage["llm_calls"],
            prompt_tokens=usage["prompt_tokens"] or 0,
            completion_tokens=usage["completion_tokens"] or 0,
            llm_seconds=usage["llm_seconds"] or 0.0,
            model=usage["llm_model"],
            cost_usd=usage["cost_usd"],
        )
    return Task(**values)


def _tasks(stmt: Any, conn: Connection) -> list[Task]:
    return [_task(r) for r in conn.execute(stmt)]


class SqlAlchemyTaskRepository:
    def __init__(self, engine: Engine, default_max_attempts: int | None = None, retry: TransientRetry | None = None):
        self._engine = engine
        self._default_max_attempts = default_max_attempts
        self._retry = retry or TransientRetry()

    # -- plumbing ---------------------------------------------------------------------------

    def _run(self, work: Callable[[Connection], Any], idempotent: bool = True) -> Any:
        """Run ``work`` in one transaction, retrying transient errors."""

        def once():
            with self._engine.begin() as conn:
                return work(conn)

        if idempotent:
            return self._retry(once)
        return self._retry(once, on_lost=_give_up)

    def _write(
        self, stmt, task_id: int, landed: Callable[[Task | None], bool], params: dict[str, Any] | None = None
    ) -> bool:
        """Execute one conditional statement; True when it changed exactly one row.

        After a lost connection an earlier try may have committed, so a zero rowcount is then
        checked against the row: ``landed`` says whether the row is what this write makes it.
        """
        lost: list[bool] = []
        changed = self._retry(lambda: self._rowcount(stmt, params), on_lost=lambda: lost.append(True))
        if changed == 1:
            return True
        return bool(lost) and landed(self.get(task_id))

    def _rowcount(self, stmt, params: dict[str, Any] | None = None) -> int:
        with self._engine.begin() as conn:
            return conn.execute(stmt, params).rowcount

    @staticmethod
    def _fetch(conn: Connection, task_id: int) -> Task | None:
        row = conn.execute(GET_ROW, {"b_task_id": task_id}).first()
        return None if row is None else _task(row)

    def _fenced(self, task_id: int, attempt: int, to: TaskStatus, usage: Usage | None, **values: Any) -> bool:
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.attempt == attempt, t.c.status == PROCESSING.value)
            .values(status=to.value, updated_at=utcnow(), **values, **USAGE_SUM)
        )
        landed = lambda row: row is not None and row.attempt == attempt and row.status == to  # noqa: E731
        return self._write(stmt, task_id, landed, usage_params(usage))

    # -- reads ------------------------------------------------------------------------------

    def get(self, task_id: int) -> Task | None:
        return self._run(lambda conn: self._fetch(conn, task_id))

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
        sums = [t.c.llm_calls, t.c.prompt_tokens, t.c.completion_tokens, t.c.llm_seconds, t.c.cost_usd]
        stmt = select(*(func.sum(c) for c in sums), *(func.sum(case((recent, c), else_=None)) for c in sums)).where(
            t.c.llm_calls.is_not(None)
        )
        row = self._run(lambda conn: conn.execute(stmt).one())
        return _usage_sum(row[:5]), _usage_sum(row[5:])

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

    # -- writes -----------------------------------------------------------------------------

    def create(self, task_name: str, document: str, max_attempts: int | None = None) -> Task:
        if max_attempts is None:
            max_attempts = self._default_max_attempts

        def work(conn):
            stmt = insert(t).values(
                task_name=task_name,
                document=document,
                status=PENDING.value,
                max_attempts=max_attempts,
                created_at=utcnow(),
                updated_at=utcnow(),
            )
            return self._fetch(conn, conn.execute(stmt).inserted_primary_key[0])

        # An INSERT cut off by a lost connection may have landed: trying again could duplicate it.
        return self._run(work, idempotent=False)

    def start_attempt(self, task_id: int, token: str) -> StartOutcome:
        params = {"b_task_id": task_id, "b_token": token}

        def work(conn):
            for _ in range(2):  # a second try when the row went back to pending in between
                if conn.execute(START_ATTEMPT, params).rowcount == 1:
                    return StartOutcome(StartResult.started, self._fetch(conn, task_id))
                task = self._fetch(conn, task_id)
                if task is None:
                    return StartOutcome(StartResult.missing)
                if task.status != PENDING:
                    return StartOutcome.found(task, token)
            return StartOutcome(StartResult.busy, task)

        # Safe to retry after a lost connection: a start that landed is recognised by its token.
        return self._run(work)

    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        landed = lambda row: row is not None and row.attempt == attempt and row.status == SUCCESS  # noqa: E731
        params = {"b_task_id": task_id, "b_attempt": attempt, "b_result": result, **usage_params(usage)}
        return self._write(COMMIT_ATTEMPT, task_id, landed, params)

    def retry(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        return self._to_pending(task_id, attempt, error, usage, retry_count=t.c.retry_count + 1)

    def hand_back(
        self, task_id: int, attempt: int, why: str, usage: Usage | None = None, counted: bool = False
    ) -> bool:
        return self._to_pending(task_id, attempt, why, usage, handbacks=t.c.handbacks + (1 if counted else 0))

    def _to_pending(self, task_id: int, attempt: int, error: str, usage: Usage | None, **count: Any) -> bool:
        return self._fenced(
            task_id, attempt, PENDING, usage, error=error, lease_token=None, processing_started_at=None, **count
        )

    def fail(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        return self._fenced(
            task_id, attempt, FAILED, usage, retry_count=t.c.retry_count + 1, error=error, finished_at=utcnow()
        )

    def reopen(self, task_id: int) -> bool:
        # ``attempt`` is left alone: it is the fencing token and must keep growing.
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.status == FAILED.value)
            .values(
                status=PENDING.value,
                retry_count=0,
                handbacks=0,
                lease_token=None,
                processing_started_at=None,
                finished_at=None,
                updated_at=utcnow(),
            )
        )
        return self._write(stmt, task_id, lambda row: row is not None and row.status == PENDING)

    def cancel_pending(self, task_id: int, attempt: int, error: str) -> bool:
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.attempt == attempt, t.c.status == PENDING.value)
            .values(status=FAILED.value, error=error, lease_token=None, finished_at=utcnow(), updated_at=utcnow())
        )
        return self._write(stmt, task_id, lambda row: _cancelled(row, attempt, error))

    def delete(self, task_id: int) -> bool:
        return self._write(delete(t).where(t.c.task_id == task_id), task_id, lambda row: row is None)


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


def _cancelled(row: Task | None, attempt: int, error: str) -> bool:
    return row is not None and row.attempt == attempt and row.status == FAILED and row.error == error


def _usage_sum(values: Any) -> Usage:
    calls, prompt, completion, seconds, cost = values
    return Usage(
        calls=int(calls or 0),
        prompt_tokens=int(prompt or 0),
        completion_tokens=int(completion or 0),
        llm_seconds=float(seconds or 0.0),
        cost_usd=None if cost is None else float(cost),
    )


def _give_up() -> None:
    raise Unavailable("database connection lost during a write that cannot be safely repeated") from None
