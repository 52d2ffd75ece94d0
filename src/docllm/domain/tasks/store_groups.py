"""The store's single-row writes as groups of one (``TaskStore.write_group``), and the one-row-at-a-
time reading of a group that every grouped store must agree with.

A store that writes groups (the SQL adapter, the runtime's store batcher) takes ``GroupOfOne`` for
its ``start_attempt``, ``commit``, ``retry``, ``hand_back`` and ``fail``: one code path for one row
and for many. A store that writes one row at a time (the in-memory reference) takes
``one_at_a_time`` for its ``write_group``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import FencedWrite, GroupOutcome, StartOutcome, StartRequest, WriteKind

if TYPE_CHECKING:
    from docllm.domain.tasks.ports import TaskStore


class GroupWriter(Protocol):
    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome: ...


class GroupOfOne:
    """``TaskStore``'s single-row writes, each a group of one of ``write_group``."""

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        raise NotImplementedError

    def start_attempt(self, task_id: int, token: str) -> StartOutcome:
        return self.write_group((), (StartRequest(task_id, token),)).started[0]

    def _one(self, write: FencedWrite) -> bool:
        return self.write_group((write,)).written[0]

    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        return self._one(FencedWrite(WriteKind.commit, task_id, attempt, result=result, usage=usage))

    def retry(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        return self._one(FencedWrite(WriteKind.retry, task_id, attempt, error=error, usage=usage))

    def hand_back(
        self, task_id: int, attempt: int, why: str, usage: Usage | None = None, counted: bool = False
    ) -> bool:
        return self._one(FencedWrite(WriteKind.hand_back, task_id, attempt, error=why, usage=usage, counted=counted))

    def fail(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        return self._one(FencedWrite(WriteKind.fail, task_id, attempt, error=error, usage=usage))


def apply_one(store: TaskStore, write: FencedWrite) -> bool:
    """``write`` through ``store``'s single-row method of its kind."""
    if write.kind is WriteKind.commit:
        return store.commit(write.task_id, write.attempt, write.result or {}, usage=write.usage)
    if write.kind is WriteKind.hand_back:
        return store.hand_back(write.task_id, write.attempt, write.error or "", write.usage, write.counted)
    method = store.retry if write.kind is WriteKind.retry else store.fail
    return method(write.task_id, write.attempt, write.error or "", usage=write.usage)


def one_at_a_time(store: TaskStore, writes: Sequence[FencedWrite], starts: Sequence[StartRequest]) -> GroupOutcome:
    """The reference reading of a group: its writes in order, then its starts in order, one row at
    a time through ``store``'s single-row methods."""
    written = [apply_one(store, w) for w in writes]
    return GroupOutcome(written, [store.start_attempt(s.task_id, s.token) for s in starts])
