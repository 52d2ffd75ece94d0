"""``ReviewCache`` in memory, over an ``InMemoryTaskRepository``'s entries (its commits write them)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from docllm.domain.review.cache import CachedChunk
from tests.support.memory.repository import InMemoryTaskRepository


class InMemoryReviewCache:
    def __init__(self, repo: InMemoryTaskRepository):
        self._repo = repo

    def find(self, keys: Sequence[str], since_ms: int, until_ms: int) -> dict[str, CachedChunk]:
        entries = self._repo.cache_entries
        found = (entries.get(k) for k in set(keys))
        return {e.key: copy.deepcopy(e) for e in found if e is not None and since_ms <= e.created_ms <= until_ms}

    def sweep(self, before_ms: int, after_ms: int, limit: int) -> int:
        entries = self._repo.cache_entries
        stale = [e for e in entries.values() if not before_ms <= e.created_ms <= after_ms]
        gone = sorted(stale, key=lambda e: (e.created_ms > after_ms, e.created_ms))[:limit]
        for e in gone:
            del entries[e.key]
        return len(gone)
