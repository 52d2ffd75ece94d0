"""The original note's deployment, as the tests rebuild it (reference/original-design-note.txt).

Its table as it is in the field (MySQL ENUM status, DATETIMEs that ``NOW()`` fills in the server's
local time, a TEXT result), its producer (INSERT, then LPUSH of a payload written with
``ensure_ascii=False``) and what its worker does to Redis and the row, step by step, so that a test
can stop it between any two steps as a dying container would.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from docllm.adapters.redis.keys import RedisKeys

ORIGINAL_TABLE = """
CREATE TABLE task_doc_llm (
  task_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  task_name VARCHAR(255) NOT NULL,
  document LONGTEXT,
  status ENUM('pending','processing','success','failed') NOT NULL DEFAULT 'pending',
  retry_count INT NOT NULL DEFAULT 0,
  processing_started_at DATETIME NULL,
  result TEXT NULL,
  created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
# The columns the original table has: what "finished rows are never modified" is checked on.
ORIGINAL_COLUMNS = (
    "task_id",
    "task_name",
    "document",
    "status",
    "retry_count",
    "processing_started_at",
    "result",
    "created_at",
    "updated_at",
)


def payload(task_id: int, task_name: str) -> str:
    """The original producer's payload, byte for byte."""
    return json.dumps({"task_id": task_id, "task_name": task_name}, ensure_ascii=False)


class OriginalDeployment:
    """The old code's statements, on a PyMySQL connection (autocommit) and a Redis client."""

    def __init__(self, conn: Any, client: redis.Redis, prefix: str = "docllm"):
        self.conn, self.redis, self.keys = conn, client, RedisKeys(prefix)

    def create_table(self) -> None:
        self._sql(ORIGINAL_TABLE)

    def _sql(self, statement: str, *params: Any) -> int:
        with self.conn.cursor() as cur:
            cur.execute(statement, params or None)
            self.conn.commit()
            return cur.lastrowid

    # -- producer -------------------------------------------------------------------------
    def insert(
        self, task_name: str, document: str, status: str = "pending", result: str | None = None, retry_count: int = 0
    ) -> int:
        started = "NOW()" if status != "pending" else "NULL"
        return self._sql(
            "INSERT INTO task_doc_llm (task_name, document, status, result, retry_count, processing_started_at)"
            f" VALUES (%s, %s, %s, %s, %s, {started})",
            task_name,
            document,
            status,
            result,
            retry_count,
        )

    def produce(self, task_name: str, document: str) -> int:
        task_id = self.insert(task_name, document)
        self.redis.lpush(self.keys.ready, payload(task_id, task_name))
        return task_id

    # -- worker, one step at a time ---------------------------------------------------------
    def take(self) -> tuple[int, bytes] | None:
        """``brpoplpush(ready, processing)`` without the wait."""
        raw = self.redis.rpoplpush(self.keys.ready, self.keys.processing)
        if raw is None:
            return None
        assert isinstance(raw, bytes)  # the client is built without decode_responses
        return int(json.loads(raw)["task_id"]), raw

    def stamp(self, task_id: int, start_ts: int) -> None:
        """``hset(processing_ts, task_id, int(time.time()))``: the worker's own clock."""
        self.redis.hset(self.keys.processing_ts, task_id, start_ts)

    def mark_processing(self, task_id: int) -> bool:
        """``mark_task_processing``: pending -> processing, ``processing_started_at=func.now()``."""
        with self.conn.cursor() as cur:
            changed = cur.execute(
                "UPDATE task_doc_llm SET status='processing', processing_started_at=NOW()"
                " WHERE task_id=%s AND status='pending'",
                (task_id,),
            )
            self.conn.commit()
            return changed == 1

    def write_result(self, task_id: int, status: str, result: str | None) -> None:
        """What ``process_task`` writes at its end (JSON or not: the old code's choice)."""
        self._sql("UPDATE task_doc_llm SET status=%s, result=%s WHERE task_id=%s", status, result, task_id)

    def unlist(self, raw: bytes) -> None:
        """The ``finally`` block's first step: ``lrem(processing, 1, raw)``."""
        # redis-py's annotation says str, but LREM's value is encoded like any other (bytes as is)
        self.redis.lrem(self.keys.processing, 1, raw)  # type: ignore[arg-type]

    def unstamp(self, task_id: int) -> None:
        """The ``finally`` block's second step: ``hdel(processing_ts, task_id)``."""
        self.redis.hdel(self.keys.processing_ts, task_id)

    def reclaim(self, task_id: int) -> None:
        """The old reaper's ``reclaim_task`` (its DB half): processing -> pending, retry_count + 1."""
        self._sql(
            "UPDATE task_doc_llm SET status='pending', retry_count=retry_count+1,"
            " processing_started_at=NULL, result=NULL WHERE task_id=%s AND status='processing'",
            task_id,
        )

    def original_rows(self, where: str = "status IN ('success', 'failed')") -> dict[int, tuple]:
        """The original columns, as stored (HEX of the bytes), of the rows ``where`` selects."""
        cols = ", ".join(f"HEX({c})" if c in ("task_name", "document", "result") else c for c in ORIGINAL_COLUMNS)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {cols} FROM task_doc_llm WHERE {where} ORDER BY task_id")  # noqa: S608
            return {row[0]: row for row in cur.fetchall()}
