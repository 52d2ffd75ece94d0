"""The ReviewCache port over SQLAlchemy Core: the table ``review_cache`` (migration 0011).

Reads (``find``) and expiry (``sweep``) are this class's; the writes are the task store's, in the
transaction of the commit each entry came from (``write_entries``, called by
``repository/store.py``'s ``write_group``), so an entry exists only beside a committed report (I17).
A write keeps the newest answer of a key (a ``--fresh`` review replaces the one it bypassed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import Engine

from docllm.adapters.sql.engine import TransientRetry
from docllm.adapters.sql.schema import review_cache as rc
from docllm.domain.review.cache import CachedChunk
from docllm.domain.tasks.storable import storable_text

IN_CHUNK = 500  # keys per IN list: a 10 MB document is some 850 chunks
ENTRY_BYTES = 1024  # what a row sends beyond its answer (key, model, deployment, numbers), with margin
UPDATED = ("answer", "model", "deployment", "task_id", "created_ms", "prompt_tokens", "completion_tokens")


class SqlAlchemyReviewCache:
    def __init__(self, engine: Engine, retry: TransientRetry | None = None):
        self._engine = engine
        self._retry = retry or TransientRetry()

    def _run(self, work: Any) -> Any:
        def once() -> Any:
            with self._engine.begin() as conn:
                return work(conn)

        return self._retry(once)

    def find(self, keys: Sequence[str], since_ms: int, until_ms: int) -> dict[str, CachedChunk]:
        wanted = sorted(set(keys))
        if not wanted:
            return {}

        def work(conn: Connection) -> dict[str, CachedChunk]:
            found: dict[str, CachedChunk] = {}
            for i in range(0, len(wanted), IN_CHUNK):
                stmt = select(rc).where(
                    rc.c.cache_key.in_(wanted[i : i + IN_CHUNK]), rc.c.created_ms.between(since_ms, until_ms)
                )
                for row in conn.execute(stmt):
                    entry = _entry(row)
                    if entry is not None:
                        found[entry.key] = entry
            return found

        return self._run(work)

    def sweep(self, before_ms: int, after_ms: int, limit: int) -> int:
        def work(conn: Connection) -> int:
            # Two index ranges (the oldest, then any stamped ahead), each at most ``limit`` rows.
            old = select(rc.c.cache_key).where(rc.c.created_ms < before_ms).order_by(rc.c.created_ms).limit(limit)
            keys = list(conn.execute(old).scalars())
            if len(keys) < limit:
                ahead = select(rc.c.cache_key).where(rc.c.created_ms > after_ms).limit(limit - len(keys))
                keys += list(conn.execute(ahead).scalars())
            if not keys:
                return 0
            stale = (rc.c.created_ms < before_ms) | (rc.c.created_ms > after_ms)
            return int(conn.execute(delete(rc).where(rc.c.cache_key.in_(keys), stale)).rowcount)

        return self._run(work)


def _entry(row: Any) -> CachedChunk | None:
    """A row as an entry; None for an answer that does not read as one (never served)."""
    try:
        answer = json.loads(row.answer)
    except ValueError:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("findings"), list):
        return None
    return CachedChunk(
        row.cache_key,
        answer,
        row.model,
        row.deployment,
        row.task_id,
        row.created_ms,
        row.prompt_tokens or 0,
        row.completion_tokens or 0,
    )


def entry_row(entry: CachedChunk) -> dict[str, Any]:
    """An entry as its row; the answer as JSON text every UTF-8 column stores (lone surrogates
    replaced, as a report's are: domain/tasks/storable.py)."""
    return {
        "cache_key": entry.key,
        "answer": storable_text(json.dumps(entry.answer, ensure_ascii=False))[0],
        "model": storable_text(entry.model)[0][:255],
        "deployment": None if entry.deployment is None else storable_text(entry.deployment)[0][:128],
        "task_id": entry.task_id,
        "created_ms": entry.created_ms,
        "prompt_tokens": entry.prompt_tokens,
        "completion_tokens": entry.completion_tokens,
    }


def _upsert(dialect: str) -> Any:
    """INSERT that keeps the newest answer of a key, in the dialect's words; None: another dialect."""
    if dialect == "sqlite":
        stmt = sqlite.insert(rc)
        return stmt.on_conflict_do_update(index_elements=[rc.c.cache_key], set_={c: stmt.excluded[c] for c in UPDATED})
    if dialect in ("mysql", "mariadb"):
        mine = mysql.insert(rc)
        return mine.on_duplicate_key_update({c: mine.inserted[c] for c in UPDATED})
    return None


def write_entries(conn: Connection, entries: Sequence[CachedChunk], budget: int | None) -> int:
    """Upsert ``entries`` inside the caller's transaction (a commit's), in key order, each statement
    below ``budget`` bytes (the server's packet, as the store bounds its UPDATEs); an entry that
    would not fit one statement alone is left out: not cached, and the commit is not refused for
    it. How many were written."""
    rows = sorted((entry_row(e) for e in entries), key=lambda r: r["cache_key"])
    sizes = [ENTRY_BYTES + len(r["answer"].encode("utf-8")) * 2 for r in rows]  # * 2: escapes, at most
    kept = [(r, n) for r, n in zip(rows, sizes, strict=True) if budget is None or n <= budget]
    if not kept:
        return 0
    stmt = _upsert(conn.dialect.name)
    parts: list[list[dict[str, Any]]] = [[]]
    used = 0
    for row, size in kept:
        if parts[-1] and budget is not None and used + size > budget:
            parts.append([])
            used = 0
        parts[-1].append(row)
        used += size
    for part in parts:
        if stmt is None:  # another dialect: the plain two steps
            conn.execute(delete(rc).where(rc.c.cache_key.in_([r["cache_key"] for r in part])))
            conn.execute(rc.insert(), part)
        else:
            conn.execute(stmt, part)
    return len(kept)
