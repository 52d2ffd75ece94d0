"""Grouping a process's store writes: the starts and the finished attempts of the worker's
concurrent attempts go to the store as groups (``TaskStore.write_group``, one transaction each),
formed as ``grouper.Grouper`` forms them (a lone request is not delayed; under load a request
waits at most one linger plus the groups ahead of it; a failed group fails every request in it).

The callers are the port-call threads (``TaskProcessor.begin`` and ``finish`` run there). The
simulation runs the same code inline: one request at a time, so a group is one request (a claimed
batch's starts, ``TaskProcessor.begin_batch``, or one attempt's end), with no waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from docllm.domain.tasks.model import FencedWrite, GroupOutcome, StartRequest, Task
from docllm.domain.tasks.ports import TaskStore
from docllm.domain.tasks.store_groups import GroupOfOne
from docllm.runtime.grouper import MAX_GROUP, MAX_IN_FLIGHT, Grouper

Request = tuple[Sequence[FencedWrite], Sequence[StartRequest]]


class StoreBatcher(Grouper[Request, GroupOutcome]):
    def __init__(
        self,
        store: TaskStore,
        linger_s: float = 0.005,
        max_group: int = MAX_GROUP,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(self._write, lambda r: len(r[0]) + len(r[1]), linger_s, max_group, max_in_flight, clock)
        self.store = store

    def submit_writes(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        return self.submit((tuple(writes), tuple(starts)))

    def _write(self, requests: list[Request]) -> list[GroupOutcome]:
        """One ``write_group`` for the requests' writes and starts, its outcome split back per request."""
        outcome = self.store.write_group([w for r in requests for w in r[0]], [s for r in requests for s in r[1]])
        answers, w, s = [], 0, 0
        for writes, starts in requests:
            answers.append(GroupOutcome(outcome.written[w : w + len(writes)], outcome.started[s : s + len(starts)]))
            w, s = w + len(writes), s + len(starts)
        return answers


class GroupedStore(GroupOfOne):
    """The worker's ``TaskStore``: its starts and its end-of-attempt writes each go through a
    ``StoreBatcher`` of their own, so a claimed batch's starts (the next requests wait on them) never
    queue behind a burst's ends (issue 24); every other call goes straight to the store."""

    def __init__(self, store: TaskStore, ends: StoreBatcher, starts: StoreBatcher):
        self.store, self.ends, self.starts = store, ends, starts

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        return (self.ends if writes else self.starts).submit_writes(writes, starts)

    def get(self, task_id: int) -> Task | None:
        return self.store.get(task_id)

    def create(
        self,
        task_name: str,
        document: str,
        max_attempts: int | None = None,
        rubric: str | None = None,
        priority: str | None = None,
        tenant: str | None = None,
        traceparent: str | None = None,
    ) -> Task:
        return self.store.create(task_name, document, max_attempts, rubric, priority, tenant, traceparent)

    def reopen(self, task_id: int) -> bool:
        return self.store.reopen(task_id)

    def cancel_pending(self, task_id: int, attempt: int, error: str) -> bool:
        return self.store.cancel_pending(task_id, attempt, error)

    def delete(self, task_id: int) -> bool:
        return self.store.delete(task_id)


def grouped(store: TaskStore, linger_ms: float) -> Any:
    """``store`` with its writes grouped (``DOCLLM_STORE_LINGER_MS``)."""
    linger_s = linger_ms / 1000
    return GroupedStore(store, StoreBatcher(store, linger_s=linger_s), StoreBatcher(store, linger_s=linger_s))
