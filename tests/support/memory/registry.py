"""The WorkerRegistry port in memory: records with an expiry on the given clock (tests, fakes)."""

from __future__ import annotations

import threading

from docllm.domain.tasks.ports import Clock
from docllm.domain.tasks.workers import WorkerRecord


class InMemoryWorkerRegistry:
    def __init__(self, clock: Clock):
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, tuple[WorkerRecord, int]] = {}  # id -> (record, expires at ms)

    def beat(self, record: WorkerRecord, ttl_ms: int) -> None:
        with self._lock:
            self._records[record.id] = (record, self._clock.now_ms() + int(ttl_ms))

    def remove(self, worker_id: str) -> None:
        with self._lock:
            self._records.pop(worker_id, None)

    def live(self) -> list[WorkerRecord]:
        now = self._clock.now_ms()
        with self._lock:
            for worker_id in [w for w, (_, until) in self._records.items() if until < now]:
                del self._records[worker_id]
            return [self._records[w][0] for w in sorted(self._records)]
