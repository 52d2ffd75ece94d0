"""Read-only looks at Redis and the database, straight from the test process."""

from __future__ import annotations

import json
from typing import Any

import redis
import sqlalchemy as sa

from docllm.adapters.redis.client import make_redis_client
from docllm.adapters.redis.keys import RedisKeys


def _text(value: bytes | str) -> str:
    """A Redis reply as text; a payload that is not UTF-8 survives as surrogate escapes."""
    return value if isinstance(value, str) else value.decode("utf-8", "surrogateescape")


class Probe:
    """Looks at Redis and the database directly (no CLI start-up cost), for waits and checks."""

    def __init__(self, redis_url: str, database_url: str, prefix: str):
        self.keys = RedisKeys(prefix)
        if redis_url.startswith(("redis+", "rediss+")):  # Sentinel or Cluster: the product's client
            self.redis: Any = make_redis_client(redis_url, "")
        else:
            self.redis = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2)
        self.engine = sa.create_engine(
            database_url, pool_pre_ping=True, pool_size=2, connect_args={"connect_timeout": 5, "read_timeout": 30}
        )

    def close(self) -> None:
        self.redis.close()
        self.engine.dispose()

    def leases(self) -> list[dict[str, Any]]:
        """Every lease: token, holder (the worker_id), task_id, claimed_at (ms, Redis clock)."""
        out = []
        for token, data in self.redis.hgetall(self.keys.leases).items():
            lease = json.loads(_text(data))  # a payload may not be UTF-8
            lease["token"] = _text(token)
            out.append(lease)
        return out

    def redis_now_ms(self) -> int:
        seconds, micros = self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def queue_sizes(self) -> dict[str, int]:
        k, r = self.keys, self.redis
        return {
            "ready": r.llen(k.ready),
            "processing": r.llen(k.processing),
            "delayed": r.zcard(k.delayed),
            "dead": r.llen(k.dead),
            "leases": r.hlen(k.leases),
            "lease_index": r.zcard(k.lease_index),
            "processing_ts": r.hlen(k.processing_ts),
        }

    def dead_letters(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.redis.lrange(self.keys.dead, 0, -1):
            entry = json.loads(_text(raw))
            out.append(entry)
        return out

    def rows(self, with_result: bool = True) -> dict[int, dict[str, Any]]:
        cols = "task_id, task_name, status, attempt, retry_count, lease_token, error"
        cols += ", result" if with_result else ""
        with self.engine.connect() as conn:
            found = conn.execute(sa.text(f"SELECT {cols} FROM task_doc_llm")).mappings().all()  # noqa: S608
        rows = {}
        for found_row in found:
            row = dict(found_row)
            if with_result and row.get("result") is not None:
                row["result"] = json.loads(row["result"])
            rows[int(row["task_id"])] = row
        return rows

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            found = conn.execute(sa.text("SELECT status, COUNT(*) FROM task_doc_llm GROUP BY status")).all()
        return {"pending": 0, "processing": 0, "success": 0, "failed": 0} | {s: int(n) for s, n in found}

    def execute(self, sql: str, **params: Any) -> int:
        with self.engine.begin() as conn:
            return conn.execute(sa.text(sql), params).rowcount
