"""The equal-durability peer's store: docllm's two MariaDB writes per task, made as a careful user
of a peer would make them around the same LLM call (issues 24 and 31).

- start: ``UPDATE ... SET status='processing', attempt=attempt+1`` fenced on ``status='pending'``,
  then a read of the attempt number, in one transaction;
- commit: ``UPDATE ... SET status='success', result=...`` fenced on the attempt and
  ``processing``, in a second transaction.

One SQLAlchemy engine per process (``BENCH_STORE_URL``), its pool 32 connections with no overflow
and ``pool_pre_ping``, as docllm's store had before issue 31.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

POOL_SIZE = 32
_lock = threading.Lock()
_engine: list[Any] = []


def _store():
    with _lock:
        if not _engine:
            import sqlalchemy as sa

            _engine.append(
                sa.create_engine(os.environ["BENCH_STORE_URL"], pool_size=POOL_SIZE, max_overflow=0, pool_pre_ping=True)
            )
        return _engine[0]


def start(task_id: int) -> int | None:
    """The attempt number now running, or None when the row was not pending (a duplicate)."""
    import sqlalchemy as sa

    with _store().begin() as conn:
        moved = conn.execute(
            sa.text(
                "UPDATE task_doc_llm SET status='processing', attempt=attempt+1, processing_started_at=NOW(6)"
                " WHERE task_id=:id AND status='pending'"
            ),
            {"id": task_id},
        ).rowcount
        if not moved:
            return None
        read = sa.text("SELECT attempt FROM task_doc_llm WHERE task_id=:id")
        return int(conn.execute(read, {"id": task_id}).one()[0])


def commit(task_id: int, attempt: int, findings: int) -> bool:
    import sqlalchemy as sa

    with _store().begin() as conn:
        return bool(
            conn.execute(
                sa.text(
                    "UPDATE task_doc_llm SET status='success', result=:result, finished_at=NOW(6)"
                    " WHERE task_id=:id AND attempt=:attempt AND status='processing'"
                ),
                {"id": task_id, "attempt": attempt, "result": json.dumps({"findings": findings})},
            ).rowcount
        )


def reviewed_and_stored(task_id: int, review) -> None:
    """Start the row, make the LLM call, commit the row: the job body of the two-writes peer."""
    attempt = start(task_id)
    if attempt is None:
        return
    commit(task_id, attempt, review(task_id))
