"""The MarkStore port over SQLAlchemy Core: ``finding_marks`` (migration 0012).

``put`` replaces the mark of the same document and fingerprint: an UPDATE, then an INSERT when
it matched nothing, and the UPDATE again when a racing INSERT won (two people dismissing the
same finding at once: the later judgement wins, nobody gets an error). A database without the
table (not yet upgraded) has no marks to read; writing one asks for ``docllm init-db``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from sqlalchemy import Connection, delete, insert, inspect, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from docllm.adapters.sql.engine import TransientRetry
from docllm.adapters.sql.schema import MARKS_TABLE
from docllm.adapters.sql.schema import finding_marks as t
from docllm.adapters.sql.timestamps import utcnow
from docllm.domain.errors import ConfigurationError
from docllm.domain.marks.model import Mark

_FIELDS = (
    "quote_print",
    "reason",
    "note",
    "rule",
    "category",
    "severity",
    "quote",
    "heading",
    "message",
    "task_id",
    "number",
)


_NULLABLE = ("task_id", "number", "marked_at")


def _mark(row: Any) -> Mark:
    values: dict[str, Any] = {k: ("" if v is None and k not in _NULLABLE else v) for k, v in row._asdict().items()}
    return Mark(**values)


def _key(tenant: str, document: str, fingerprint: str) -> Any:
    return (t.c.tenant == tenant) & (t.c.document == document) & (t.c.fingerprint == fingerprint)


class SqlAlchemyMarkStore:
    def __init__(self, engine: Engine, retry: TransientRetry | None = None):
        self._engine = engine
        self._retry = retry or TransientRetry()
        self._table_seen = False

    def _run(self, work: Callable[[Connection], Any]) -> Any:
        def once() -> Any:
            with self._engine.begin() as conn:
                return work(conn)

        return self._retry(once)

    def _has_table(self) -> bool:
        if not self._table_seen:
            self._table_seen = self._retry(lambda: inspect(self._engine).has_table(MARKS_TABLE))
        return self._table_seen

    def put(self, mark: Mark) -> Mark:
        if not self._has_table():
            raise ConfigurationError(f"the database has no {MARKS_TABLE} table: run `docllm init-db` first")
        values = {k: getattr(mark, k) for k in _FIELDS} | {"marked_by": mark.marked_by, "marked_at": utcnow()}
        key = _key(mark.tenant, mark.document, mark.fingerprint)
        ids = {"tenant": mark.tenant, "document": mark.document, "fingerprint": mark.fingerprint}

        def work(conn: Connection) -> Mark:
            if conn.execute(update(t).where(key).values(**values)).rowcount == 0:
                conn.execute(insert(t).values(**ids, **values))
            return _mark(conn.execute(select(t).where(key)).one())

        try:
            return self._run(work)
        except IntegrityError:  # a racing put inserted it first: ours replaces it
            return self._run(work)

    def remove(self, tenant: str, document: str, fingerprint: str) -> bool:
        if not self._has_table():
            return False
        key = _key(tenant, document, fingerprint)
        return bool(self._run(lambda conn: conn.execute(delete(t).where(key)).rowcount))

    def for_documents(self, documents: Collection[str], tenant: str = "") -> dict[str, list[Mark]]:
        names = sorted(set(documents))
        if not names or not self._has_table():
            return {}
        found: dict[str, list[Mark]] = {}
        for start in range(0, len(names), 500):  # bounded IN lists
            query = select(t).where(t.c.tenant == tenant, t.c.document.in_(names[start : start + 500]))
            rows = self._rows(query)
            for row in rows:
                found.setdefault(row.document, []).append(_mark(row))
        return found

    def listed(self, document: str | None = None, limit: int = 1000) -> list[Mark]:
        if not self._has_table():
            return []
        query = select(t).order_by(t.c.marked_at.desc(), t.c.tenant, t.c.document, t.c.fingerprint).limit(limit)
        if document is not None:
            query = query.where(t.c.document == document)
        return [_mark(row) for row in self._rows(query)]

    def _rows(self, query: Any) -> list[Any]:
        return list(self._run(lambda conn: conn.execute(query).all()))
