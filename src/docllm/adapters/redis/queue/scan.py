"""The QueueScan role over Redis: the task ids every payload names, a page at a time or all at once."""

from __future__ import annotations

import json
from typing import Any, cast

from docllm.adapters.redis.queue.base import QueueBase, text
from docllm.domain.tasks.payload import task_id_of

# The lanes' structures in the order payloads move through them (ready first, as before lanes).
_LISTS = ("ready", "ready_interactive", "ready_bulk")
_TENANT_QUEUES = ("tenant_queue_interactive", "tenant_queue_default", "tenant_queue_bulk")
_ORDER = (*_LISTS, *_TENANT_QUEUES, "staging")
_NEXT = dict(zip(_ORDER, _ORDER[1:], strict=False))


class ScanOps(QueueBase):
    def referenced_task_ids(self) -> set[int]:
        named, cursor = self.referenced_page(None, self._page_size)
        while cursor is not None:
            more, cursor = self.referenced_page(cursor, self._page_size)
            named |= more
        return named

    def referenced_page(self, cursor: Any, limit: int) -> tuple[set[int], Any]:
        """Delayed (ZSCAN), then the lanes' lists: ready and the other lanes' plain lists (LRANGE
        by index from the newest end: a claim takes from the other end and an LPUSH only makes a
        page read again) and tenant queues (HSCAN), then staging, then leases (HSCAN): the order
        payloads move in, so one moving during the lap is seen at least once. (A move against
        that flow, a requeue or a retry during the lap, can be missed; the reconciler's grace
        and fencing cover it.) About ``limit`` payloads per call, whatever the queue holds; a
        small queue is read whole in one call."""
        step: Any = cursor or ("delayed", 0)
        named: set[int] = set()
        left = max(1, limit)
        with self._errors("referenced_page"):
            while step is not None and left > 0:
                raws, step = self._scan_step(step, left)
                named |= {tid for tid in map(task_id_of, map(text, raws)) if tid is not None}
                left -= max(len(raws), 10)  # a SCAN page may come back empty
        return named, step

    def _scan_step(self, step: tuple[str, int], limit: int) -> tuple[list[Any], Any]:
        stage, at = step
        keys, client = self._keys, self._client
        if stage == "delayed":
            at, found = client.zscan(keys.delayed, at, count=limit)
            return [member for member, _ in found], ("delayed", at) if at else ("ready", 0)
        if stage in _LISTS:
            raws = client.lrange(getattr(keys, stage), at, at + limit - 1)
            return raws, (stage, at + limit) if len(raws) == limit else (_NEXT[stage], 0)
        if stage in _TENANT_QUEUES:  # payloads under "tenant|seq"; counters ("t|h", "#n") are skipped
            at, queued = client.hscan(getattr(keys, stage), at, count=limit)
            items = [raw for f, raw in cast(dict[Any, Any], queued).items() if not text(f).endswith(("|h", "|t", "#n"))]
            return items, (stage, at) if at else (_NEXT[stage], 0)
        if stage == "staging":  # payloads between a blocking claimer's two steps: a handful
            return client.lrange(keys.staging, 0, -1), ("leases", 0)
        at, found_fields = client.hscan(keys.leases, at, count=limit)
        # redis-py types HSCAN as dict | list (the list is for no_values=True only, not used here)
        fields = cast(dict[bytes | str, bytes | str], found_fields)
        return [json.loads(text(data))["raw"] for data in fields.values()], ("leases", at) if at else None
