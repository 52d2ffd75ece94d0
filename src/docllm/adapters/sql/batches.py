"""The BatchStore port over SQLAlchemy Core: ``llm_batches`` and its members (migration 0009).

A move is one conditional UPDATE whose WHERE holds the state it moves from, so two pollers that
race from one state get one rowcount of 1 between them; nothing is read and written back. Times
are the authority's, as the caller gives them (domain/batches/model.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from docllm.adapters.sql.engine import TransientRetry
from docllm.adapters.sql.schema import llm_batch_tasks as m
from docllm.adapters.sql.schema import llm_batches as b
from docllm.domain.batches.model import (
    TERMINAL,
    Batch,
    BatchCount,
    BatchMember,
    BatchState,
    check_move,
    members_of,
    moment,
)

UNFINISHED = tuple(s.value for s in BatchState if s not in TERMINAL)


def batch_of(row: Any, members: tuple[BatchMember, ...] = ()) -> Batch:
    values = row._asdict()
    return Batch(**values | {"state": BatchState(values["state"]), "members": members})


class SqlAlchemyBatchStore:
    def __init__(self, engine: Engine, retry: TransientRetry | None = None):
        self._engine = engine
        self._retry = retry or TransientRetry()

    def _run(self, work: Callable[[Connection], Any], lost: list[bool] | None = None) -> Any:
        """``work`` in one transaction, transient errors retried; ``lost`` hears of every lost
        connection (after one, an earlier try may have committed)."""

        def once():
            with self._engine.begin() as conn:
                return work(conn)

        return self._retry(once, on_lost=None if lost is None else lambda: lost.append(True))

    def open(
        self,
        ref: str,
        deployment: str,
        members: Iterable[BatchMember | tuple[int, int]],
        now_ms: int,
        max_chunk_chars: int | None = None,
    ) -> Batch:
        chosen, when = members_of(members), moment(now_ms)
        lost: list[bool] = []

        def work(conn: Connection) -> Batch:
            if lost:  # an earlier try may have landed: ``ref`` is the caller's fresh id, so a row is ours
                found = _read(conn, ref)
                if found is not None:
                    return found
            batch = Batch(
                ref, deployment, BatchState.open, len(chosen), when, when, chosen, max_chunk_chars=max_chunk_chars
            )
            row: dict[str, Any] = {"ref": ref, "deployment": deployment, "state": batch.state.value}
            row |= {"tasks": batch.tasks, "max_chunk_chars": max_chunk_chars}
            conn.execute(insert(b).values(**row, created_at=when, updated_at=when))
            if chosen:
                conn.execute(insert(m), [{"ref": ref, "task_id": x.task_id, "attempt": x.attempt} for x in chosen])
            return batch

        try:
            return self._run(work, lost)
        except IntegrityError:
            raise ValueError(f"a batch {ref!r} is already recorded") from None

    def advance(
        self,
        ref: str,
        from_state: BatchState,
        to_state: BatchState,
        now_ms: int,
        *,
        batch_id: str | None = None,
        input_file_id: str | None = None,
        output_file_id: str | None = None,
        error_file_id: str | None = None,
        provider_status: str | None = None,
        cost_usd: float | None = None,
        error: str | None = None,
    ) -> bool:
        check_move(from_state, to_state)
        given = {
            "batch_id": batch_id,
            "input_file_id": input_file_id,
            "output_file_id": output_file_id,
            "error_file_id": error_file_id,
            "provider_status": provider_status,
            "cost_usd": cost_usd,
            "error": error,
        }
        fields = {k: v for k, v in given.items() if v is not None}
        stmt = (
            update(b)
            .where(b.c.ref == ref, b.c.state == from_state.value)
            .values(state=to_state.value, updated_at=moment(now_ms), **fields)
        )
        lost: list[bool] = []
        try:
            # PyMySQL counts matched rows (CLIENT.FOUND_ROWS), so a same-state move that changes no value counts 1.
            changed = self._run(lambda conn: conn.execute(stmt).rowcount, lost)
        except IntegrityError:
            raise ValueError(f"batch {ref!r}: batch id {batch_id!r} is recorded for another batch") from None
        if changed == 1:
            return True
        # After a lost connection the first try may have committed: it landed if the row is what it makes.
        row = self.get(ref) if lost else None
        return row is not None and row.state is to_state and all(getattr(row, k) == v for k, v in fields.items())

    def get(self, ref: str) -> Batch | None:
        return self._run(lambda conn: _read(conn, ref))

    def unfinished(self, limit: int = 100) -> list[Batch]:
        stmt = select(b).where(b.c.state.in_(UNFINISHED)).order_by(b.c.created_at, b.c.ref).limit(limit)
        return self._run(lambda conn: [batch_of(r) for r in conn.execute(stmt)])

    def of_task(self, task_id: int) -> list[str]:
        stmt = (
            select(m.c.ref)
            .join(b, b.c.ref == m.c.ref)
            .where(m.c.task_id == task_id)
            .order_by(b.c.created_at.desc(), m.c.ref.desc())
        )
        return self._run(lambda conn: list(conn.execute(stmt).scalars()))

    def recent(self, limit: int = 50) -> list[Batch]:
        stmt = select(b).order_by(b.c.created_at.desc(), b.c.ref.desc()).limit(limit)
        return self._run(lambda conn: [batch_of(r) for r in conn.execute(stmt)])

    def counts(self) -> dict[BatchState, BatchCount]:
        stmt = select(b.c.state, func.count(), func.coalesce(func.sum(b.c.tasks), 0)).group_by(b.c.state)
        rows = self._run(lambda conn: conn.execute(stmt).all())
        found = {BatchState(state): BatchCount(int(n), int(tasks)) for state, n, tasks in rows}
        return {s: found.get(s, BatchCount()) for s in BatchState}


def _read(conn: Connection, ref: str) -> Batch | None:
    row = conn.execute(select(b).where(b.c.ref == ref)).first()
    if row is None:
        return None
    pairs = conn.execute(select(m.c.task_id, m.c.attempt).where(m.c.ref == ref).order_by(m.c.task_id))
    return batch_of(row, tuple(BatchMember(t, a) for t, a in pairs))
