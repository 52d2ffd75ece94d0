"""A ``WorkerRegistry`` in memory: records expire ``ttl_ms`` after their beat on a given clock."""

from __future__ import annotations

from collections.abc import Callable

from docllm.domain.tasks.workers import WorkerRecord


class InMemoryWorkerRegistry:
    def __init__(self, now_ms: Callable[[], int]):
        self._now_ms = now_ms
        self._records: dict[str, tuple[WorkerRecord, int]] = {}

    def beat(self, record: WorkerRecord, ttl_ms: int) -> None:
        self._records[record.id] = (record, self._now_ms() + ttl_ms)

    def remove(self, worker_id: str) -> None:
        self._records.pop(worker_id, None)

    def live(self) -> list[WorkerRecord]:
        now = self._now_ms()
        return sorted((r for r, until in self._records.values() if until > now), key=lambda r: r.id)
