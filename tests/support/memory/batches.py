"""``BatchStore`` in memory: the SQL adapter's semantics (tests/contract/test_batch_store_contract.py
holds both to them), for unit tests and the simulation. Imports no database library."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import replace

from docllm.domain.batches.model import Batch, BatchCount, BatchMember, BatchState, check_move, members_of, moment


class InMemoryBatchStore:
    def __init__(self) -> None:
        self._rows: dict[str, Batch] = {}
        self._lock = threading.Lock()

    def open(
        self,
        ref: str,
        deployment: str,
        members: Iterable[BatchMember | tuple[int, int]],
        now_ms: int,
        max_chunk_chars: int | None = None,
    ) -> Batch:
        chosen, when = members_of(members), moment(now_ms)
        batch = Batch(
            ref, deployment, BatchState.open, len(chosen), when, when, chosen, max_chunk_chars=max_chunk_chars
        )
        with self._lock:
            if ref in self._rows:
                raise ValueError(f"a batch {ref!r} is already recorded")
            self._rows[ref] = batch
        return batch

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
        with self._lock:
            row = self._rows.get(ref)
            if row is None or row.state is not from_state:
                return False
            if batch_id is not None and any(o.batch_id == batch_id for o in self._rows.values() if o.ref != ref):
                raise ValueError(f"batch {ref!r}: batch id {batch_id!r} is recorded for another batch")
            self._rows[ref] = replace(row, state=to_state, updated_at=moment(now_ms), **fields)  # type: ignore[arg-type]
            return True

    def get(self, ref: str) -> Batch | None:
        with self._lock:
            return self._rows.get(ref)

    def unfinished(self, limit: int = 100) -> list[Batch]:
        with self._lock:
            rows = sorted((r for r in self._rows.values() if not r.state.terminal), key=lambda r: (r.created_at, r.ref))
        return [_listed(r) for r in rows[:limit]]

    def of_task(self, task_id: int) -> list[str]:
        with self._lock:
            rows = [r for r in self._rows.values() if any(x.task_id == task_id for x in r.members)]
        return [r.ref for r in sorted(rows, key=lambda r: (r.created_at, r.ref), reverse=True)]

    def recent(self, limit: int = 50) -> list[Batch]:
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda r: (r.created_at, r.ref), reverse=True)
        return [_listed(r) for r in rows[:limit]]

    def counts(self) -> dict[BatchState, BatchCount]:
        with self._lock:
            rows = list(self._rows.values())
        return {
            s: BatchCount(sum(1 for r in rows if r.state is s), sum(r.tasks for r in rows if r.state is s))
            for s in BatchState
        }


def _listed(batch: Batch) -> Batch:
    return replace(batch, members=())
