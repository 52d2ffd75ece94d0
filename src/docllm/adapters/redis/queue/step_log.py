"""The ClockStepLog role over Redis: the fleet's record of the authority clock's steps."""

from __future__ import annotations

from docllm.adapters.redis.queue.base import QueueBase


class ClockStepOps(QueueBase):
    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        self._run("clock_step", new_ms, old_ms, since_ms, lease_ms)  # never reads the clock: it is reporting
