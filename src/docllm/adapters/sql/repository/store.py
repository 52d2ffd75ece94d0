"""The TaskStore role over SQLAlchemy Core: the writes (MySQL/MariaDB in production, SQLite embedded).

Every write of an attempt is one conditional UPDATE fenced on ``attempt`` and ``status`` with a
rowcount check: the database decides, nothing is read, changed and written back in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import BigInteger, Double, Integer, String, bindparam, delete, func, insert, update

from docllm.adapters.sql.repository.base import FAILED, PENDING, PROCESSING, SUCCESS, RepositoryBase
from docllm.adapters.sql.schema import USAGE_COLUMNS
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.adapters.sql.timestamps import utcnow
from docllm.domain.model import StartOutcome, StartResult, Task, TaskStatus
from docllm.domain.usage import Usage

# The statements of an attempt's hot path, built once: building one per call and deriving its
# compile-cache key again each time was the largest share of the worker's CPU (docs/BENCHMARKS.md).
# Bind names start with b_ so that they never clash with the column names of a SET clause.
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


class TaskStoreOps(RepositoryBase):
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

    def _fenced(self, task_id: int, attempt: int, to: TaskStatus, usage: Usage | None, **values: Any) -> bool:
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.attempt == attempt, t.c.status == PROCESSING.value)
            .values(status=to.value, updated_at=utcnow(), **values, **USAGE_SUM)
        )
        landed = lambda row: row is not None and row.attempt == attempt and row.status == to  # noqa: E731
        return self._write(stmt, task_id, landed, usage_params(usage))

    def create(self, task_name: str, document: str, max_attempts: int | None = None, rubric: str | None = None) -> Task:
        if max_attempts is None:
            max_attempts = self._default_max_attempts

        def work(conn):
            stmt = insert(t).values(
                task_name=task_name,
                document=document,
                rubric=rubric,
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


def _cancelled(row: Task | None, attempt: int, error: str) -> bool:
    return row is not None and row.attempt == attempt and row.status == FAILED and row.error == error
