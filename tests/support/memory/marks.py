"""``MarkStore`` in memory: the SQL adapter's semantics (tests/contract/test_mark_store_contract.py
holds both to them), for unit tests. Imports no database library."""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from docllm.domain.marks.model import Mark


class InMemoryMarkStore:
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, str], Mark] = {}
        self._lock = threading.Lock()
        self._last = datetime.now(UTC)

    def _now(self) -> datetime:
        self._last = max(datetime.now(UTC), self._last + timedelta(microseconds=1))  # strictly newer
        return self._last

    def put(self, mark: Mark) -> Mark:
        with self._lock:
            stored = replace(mark, marked_at=self._now())
            self._rows[(mark.tenant, mark.document, mark.fingerprint)] = stored
            return stored

    def remove(self, tenant: str, document: str, fingerprint: str) -> bool:
        with self._lock:
            return self._rows.pop((tenant, document, fingerprint), None) is not None

    def for_documents(self, documents: Collection[str], tenant: str = "") -> dict[str, list[Mark]]:
        wanted, found = set(documents), dict[str, list[Mark]]()
        with self._lock:
            for (owner, document, _), mark in sorted(self._rows.items()):
                if owner == tenant and document in wanted:
                    found.setdefault(document, []).append(mark)
        return found

    def listed(self, document: str | None = None, limit: int = 1000) -> list[Mark]:
        with self._lock:
            marks = [m for m in self._rows.values() if document is None or m.document == document]
        marks.sort(key=lambda m: (-(m.marked_at or self._last).timestamp(), m.tenant, m.document, m.fingerprint))
        return marks[:limit]
