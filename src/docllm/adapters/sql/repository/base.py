"""What both roles of the SQL repository share: the engine, one transaction with retries, a row as a ``Task``.

Timestamps come from the database's ``utcnow()``; they are returned as aware UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.engine import Engine

from docllm.adapters.sql.engine import TransientRetry
from docllm.adapters.sql.schema import USAGE_COLUMNS
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.domain.errors import Unavailable
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import Task, TaskStatus

PENDING, PROCESSING, SUCCESS, FAILED = TaskStatus
FULL_ROW = tuple(t.c)
LISTED_ROW = tuple(c for c in t.c if c.name != "document")

# Built once, like the write store's hot-path statements (see store.py).
GET_ROW = select(*FULL_ROW).where(t.c.task_id == bindparam("b_task_id"))


def task_of(row) -> Task:
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
            cached_tokens=usage["cached_tokens"] or 0,
        )
    return Task(**values)


def tasks_of(stmt: Any, conn: Connection) -> list[Task]:
    return [task_of(r) for r in conn.execute(stmt)]


class RepositoryBase:
    """The plumbing of ``SqlAlchemyTaskRepository`` and the lookup both roles use (``TaskLookup``)."""

    def __init__(self, engine: Engine, default_max_attempts: int | None = None, retry: TransientRetry | None = None):
        self._engine = engine
        self._default_max_attempts = default_max_attempts
        self._retry = retry or TransientRetry()

    def _run(self, work: Callable[[Connection], Any], idempotent: bool = True) -> Any:
        """Run ``work`` in one transaction, retrying transient errors."""

        def once():
            with self._engine.begin() as conn:
                return work(conn)

        if idempotent:
            return self._retry(once)
        return self._retry(once, on_lost=_give_up)

    @staticmethod
    def _fetch(conn: Connection, task_id: int) -> Task | None:
        row = conn.execute(GET_ROW, {"b_task_id": task_id}).first()
        return None if row is None else task_of(row)

    def get(self, task_id: int) -> Task | None:
        return self._run(lambda conn: self._fetch(conn, task_id))


def _give_up() -> None:
    raise Unavailable("database connection lost during a write that cannot be safely repeated") from None
