"""The QueueInspection role over Redis: leases in flight, figures, dead letters (read and removed)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection

from docllm.adapters.redis.queue.base import QueueBase, dead_letter_of, delivery_of, text
from docllm.domain.tasks.model import DeadLetter, Delivery, QueueStats


class InspectionOps(QueueBase):
    def in_flight(self, limit: int) -> list[Delivery]:
        """For display: scans every lease in pages (O(in flight)), so keep it off hot paths."""
        if limit <= 0:
            return []
        with self._errors("in_flight"):
            scan = self._client.hscan_iter(self._keys.leases, count=self._page_size)
            leases = {text(token): json.loads(text(data)) for token, data in scan}
            oldest = heapq.nsmallest(limit, leases, key=lambda token: (leases[token]["claimed_at"], token))
            deadlines = self._client.zmscore(self._keys.lease_index, oldest) if oldest else []
        return [
            delivery_of(token, deadline, leases[token])
            for token, deadline in zip(oldest, deadlines, strict=True)
            if deadline is not None  # ended between the two reads
        ]

    def stats(self) -> QueueStats:
        """``oldest_claimed_at_ms`` has whole-second precision here (see stats.lua)."""
        ready, processing, delayed, dead, oldest = self._run("stats")
        return QueueStats(ready, processing, delayed, dead, None if oldest is None else int(oldest))

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Newest first."""
        if limit <= 0:
            return []
        with self._errors("dead_letters"):
            entries = self._client.lrange(self._keys.dead, 0, limit - 1)
        return [dead_letter_of(entry) for entry in entries]

    def remove_dead_letters(self, task_ids: Collection[int] | None) -> list[DeadLetter]:
        """One script: one pass over the list for any number of tasks (O(dead letters + ids))."""
        if task_ids is not None and not task_ids:
            return []
        ids = ["*"] if task_ids is None else [str(int(t)) for t in task_ids]
        return [dead_letter_of(entry) for entry in self._run("remove_dead", *ids)]
