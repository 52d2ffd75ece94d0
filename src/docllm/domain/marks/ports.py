"""Where marks are kept: a table of its own beside the tasks (migration 0012)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from docllm.domain.marks.model import Mark


class MarkStore(Protocol):
    """Marks by (tenant, document, fingerprint): one judgement per finding of a tenant's document
    (tenant "" for tasks without one), the latest wins. A tenant's marks never touch another's."""

    def put(self, mark: Mark) -> Mark:
        """Keep ``mark``, replacing the one of the same tenant, document and fingerprint; returns it
        as stored (``marked_at`` the store's time)."""

    def remove(self, tenant: str, document: str, fingerprint: str) -> bool:
        """Forget the mark; False when there was none."""

    def for_documents(self, documents: Collection[str], tenant: str = "") -> dict[str, list[Mark]]:
        """The tenant's marks of these documents, by document (those without marks are absent)."""

    def listed(self, document: str | None = None, limit: int = 1000) -> list[Mark]:
        """Marks newest first, of one document or of all, every tenant's."""
