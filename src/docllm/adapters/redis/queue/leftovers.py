"""The OriginalLeftovers role over Redis: what the original note's workers leave in processing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from docllm.adapters.redis.queue.base import QueueBase, text, wire
from docllm.domain.tasks.model import Leftovers


class LeftoversOps(QueueBase):
    def leftovers(self, limit: int) -> Leftovers:
        """O(1) when nothing can be left over, else one consistent read of what is in flight (see
        leftovers.lua), so what it reports was lease-less at that instant. A stamp left over while
        leases without a stamp of their own are in flight is found once they end."""
        found = self._run("leftovers")
        if not found:
            return Leftovers()
        entries, flat_stamps, leases = found
        held = [json.loads(text(data)) for data in leases]
        extra = Counter(map(text, reversed(entries)))  # from the tail: oldest first
        extra.subtract(Counter(lease["raw"] for lease in held))
        named = {int(lease["task_id"]) for lease in held if isinstance(lease.get("task_id"), (int, float))}
        payloads = [raw for raw, count in extra.items() for _ in range(count)]  # count <= 0: none
        stamps = []
        for key, value in zip(flat_stamps[::2], flat_stamps[1::2], strict=True):
            task_id = text(key)
            if task_id.isdigit() and int(task_id) not in named:  # every writer's key is a task id
                stamps.append((int(task_id), text(value)))
        limit = max(0, limit)
        return Leftovers(tuple(payloads[:limit]), tuple(sorted(stamps)[:limit]))

    def release_leftovers(self, payloads: Sequence[str], stamps: Sequence[tuple[int, str]], seen_at_ms: int) -> int:
        pairs = [part for task_id, value in stamps for part in (task_id, wire(value))]
        return int(self._run("release_leftovers", seen_at_ms // 1000, len(payloads), *map(wire, payloads), *pairs))
