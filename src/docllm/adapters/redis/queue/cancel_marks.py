"""The CancelMarks role over Redis: the operator's cancel marks (one hash, task id -> when)."""

from __future__ import annotations

from collections.abc import Collection

from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.queue.base import QueueBase


class CancelMarksOps(QueueBase):
    def mark_cancelled(self, task_ids: Collection[int]) -> None:
        if task_ids:
            now = self._clock.now_ms()
            with redis_errors("mark_cancelled"):
                self._client.hset(self._keys.cancelled, mapping={str(int(t)): now for t in task_ids})

    def cancel_marks(self, task_ids: Collection[int]) -> set[int]:
        ids = [int(t) for t in task_ids]
        if not ids:
            return set()
        with redis_errors("cancel_marks"):
            found = self._client.hmget(self._keys.cancelled, [str(t) for t in ids])
        return {t for t, at in zip(ids, found, strict=True) if at is not None}

    def clear_cancelled(self, task_ids: Collection[int]) -> None:
        if task_ids:
            with redis_errors("clear_cancelled"):
                self._client.hdel(self._keys.cancelled, *[str(int(t)) for t in task_ids])
