"""The Recovery role over Redis: expired leases, stale staging, due retries, clamped deadlines."""

from __future__ import annotations

import json

from docllm.adapters.redis.queue.base import QueueBase, delivery_of, text
from docllm.domain.tasks.model import Delivery

# Processes read the authority clock at slightly different moments: a deadline this much past the
# horizon is still legitimate (clamp).
CLAMP_SLACK_MS = 1_000


class RecoveryOps(QueueBase):
    def expired(self, limit: int, start: float = 0.0) -> list[Delivery]:
        """Only the expired members of the lease index are read. An index entry without lease data
        (no script writes one) is removed by the script and not returned: nothing to recover."""
        now = self._verdict_ms() if limit > 0 else None
        if now is None:  # (or no verdict yet: a clock just started, after a step it could not see)
            return []
        flat = self._run("expired", now, limit, repr(min(max(start, 0.0), 0.999999)))
        return [delivery_of(flat[i], flat[i + 1], json.loads(text(flat[i + 2]))) for i in range(0, len(flat), 3)]

    def unstage(self, grace_ms: int, limit: int) -> int:
        return int(self._run("unstage", self._clock.now_ms(), grace_ms, limit))

    def promote_due(self, limit: int) -> int:
        """In steps of ``page_size``, so no single script holds the server for long."""
        now, moved = self._clock.now_ms(), 0
        while moved < limit:
            step = min(limit - moved, self._page_size)
            done = int(self._run("promote", now, step))
            moved += done
            if done < step:
                break
        return moved

    def clamp(self, lease_ms: int, max_delay_ms: int, limit: int) -> int:
        now = self._verdict_ms()  # a clock just started could clamp on the new side of a step it cannot see
        if now is None:
            return 0
        return int(self._run("clamp", now, lease_ms, max_delay_ms, limit, CLAMP_SLACK_MS))
