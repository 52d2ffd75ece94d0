"""The WorkerRegistry port over Redis: a hash per worker with a TTL, and a sorted set of worker
ids scored by when each record expires, cleaned by the readers (only expired members are removed).

Keys live under the queue's prefix, so they share its Cluster hash tag.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, cast

import redis

from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.domain.tasks.ports import Clock
from docllm.domain.tasks.workers import InFlight, WorkerRecord


@functools.cache
def _beat_script() -> str:
    return (resources.files("docllm.adapters.redis") / "lua" / "worker_beat.lua").read_text("utf-8")


class RedisWorkerRegistry:
    def __init__(self, client: redis.Redis, keys_or_prefix: RedisKeys | str = "docllm", clock: Clock | None = None):
        self._client = client
        self._keys = RedisKeys.of(keys_or_prefix)
        self._clock = clock or RedisServerClock(client)
        self._beat = client.register_script(_beat_script())

    def beat(self, record: WorkerRecord, ttl_ms: int) -> None:
        fields = [part for item in _fields(record).items() for part in item]
        keys = [self._keys.workers, self._keys.worker(record.id)]
        with redis_errors("worker_beat"):
            self._beat(keys=keys, args=[record.id, self._clock.now_ms(), int(ttl_ms), *fields])

    def remove(self, worker_id: str) -> None:
        with redis_errors("worker_remove"):
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._keys.worker(worker_id))
            pipe.zrem(self._keys.workers, worker_id)
            pipe.execute()

    def live(self) -> list[WorkerRecord]:
        """O(live workers): the index is trimmed of expired ids first, then each hash is read."""
        now = self._clock.now_ms()
        with redis_errors("workers"):
            self._client.zremrangebyscore(self._keys.workers, "-inf", f"({now}")
            members = cast(list[bytes | str], self._client.zrange(self._keys.workers, 0, -1))
            ids = sorted(_text(member) for member in members)
            pipe = self._client.pipeline(transaction=False)
            for worker_id in ids:
                pipe.hgetall(self._keys.worker(worker_id))
            found = pipe.execute() if ids else []
            gone = [worker_id for worker_id, data in zip(ids, found, strict=True) if not data]
            if gone:  # the hash expired before its index entry: a clock step, or a hand-made key
                self._client.zrem(self._keys.workers, *gone)
        return [_record(data) for data in found if data]


def _fields(record: WorkerRecord) -> dict[str, str]:
    return {
        "id": record.id,
        "host": record.host,
        "pid": str(record.pid),
        "version": record.version,
        "slots": str(record.slots),
        "in_flight": json.dumps([[f.task_id, f.attempt, f.age_s] for f in record.in_flight]),
        "started_at": repr(float(record.started_at)),
        "last_beat": repr(float(record.last_beat)),
    }


def _record(data: dict[Any, Any]) -> WorkerRecord:
    d = {_text(k): _text(v) for k, v in data.items()}
    flights = tuple(InFlight(int(t), int(a), float(age)) for t, a, age in json.loads(d.get("in_flight") or "[]"))
    return WorkerRecord(
        id=d["id"],
        host=d.get("host", ""),
        pid=int(d.get("pid") or 0),
        version=d.get("version", ""),
        slots=int(d.get("slots") or 0),
        in_flight=flights,
        started_at=float(d.get("started_at") or 0),
        last_beat=float(d.get("last_beat") or 0),
    )


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
