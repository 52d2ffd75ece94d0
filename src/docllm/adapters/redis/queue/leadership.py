"""The Leadership role over Redis: the fleet's lease on a role (the reaper's, the reconciler's)."""

from __future__ import annotations

from docllm.adapters.redis.queue.base import QueueBase


class LeadershipOps(QueueBase):
    def lead(self, role: str, worker_id: str, ttl_ms: int) -> bool:
        with self._errors("lead"):
            args: list[str | int] = [worker_id.replace(" ", "_"), self._clock.now_ms(), ttl_ms]
            return bool(self._scripts["lead"](keys=[self._keys.lead(role)], args=args))
