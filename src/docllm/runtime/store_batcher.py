"""Grouping a process's store writes: the starts and the finished attempts of the worker's
concurrent attempts go to the store as groups (``TaskStore.write_group``, one transaction each).

The callers are the port-call threads (``TaskProcessor.begin`` and ``finish`` run there): each
hands its request over and waits for the group that carries it. There is no thread of its own: a
waiting caller leads a group (runs it on its own thread) when one may go, and every waiter's
answer is set when its group ends. A group may go when:

- no group is in flight: at once, with whatever is waiting (a lone request is not delayed);
- one group is in flight and ``max_in_flight`` allows another: once the oldest waiting request
  has lingered ``linger_s``, or a full group (``max_group`` rows) is waiting.

So under load the groups form while earlier ones are in flight, and a request waits at most
one linger plus the groups ahead of it. A group that fails (the database is down) fails every
request it carried with the same error: each caller retries as it would a single write.
The simulation runs the same code inline: one request at a time, so a group is one request (a
claimed batch's starts, ``TaskProcessor.begin_batch``, or one attempt's end), with no waits.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from docllm.domain.model import FencedWrite, GroupOutcome, StartRequest, Task
from docllm.domain.ports import TaskStore
from docllm.domain.store_groups import GroupOfOne

MAX_GROUP = 64
MAX_IN_FLIGHT = 2


@dataclass
class _Request:
    writes: Sequence[FencedWrite]
    starts: Sequence[StartRequest]
    at: float
    done: bool = False
    outcome: GroupOutcome | None = None
    error: BaseException | None = None
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = len(self.writes) + len(self.starts)


class StoreBatcher:
    def __init__(
        self,
        store: TaskStore,
        linger_s: float = 0.005,
        max_group: int = MAX_GROUP,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store, self.linger_s, self.max_group, self.max_in_flight = store, linger_s, max_group, max_in_flight
        self._clock = clock
        self._cond = threading.Condition()
        self._waiting: deque[_Request] = deque()
        self.in_flight = 0
        self.groups = 0  # groups sent so far, and the requests they carried (for tests and benchmarks)
        self.requests = 0

    def waiting(self) -> int:
        """Requests waiting for a group (for tests and benchmarks)."""
        with self._cond:
            return len(self._waiting)

    def submit(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        request = _Request(tuple(writes), tuple(starts), self._clock())
        with self._cond:
            self._waiting.append(request)
            while not request.done:
                group = self._take()
                if group is None:
                    self._cond.wait(self._wait_s())
                    continue
                self._cond.release()
                try:
                    self._send(group)
                finally:
                    self._cond.acquire()
                    self.in_flight -= 1
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error
        assert request.outcome is not None
        return request.outcome

    def _take(self) -> list[_Request] | None:
        """The group to send now (taken off the waiting line), or None."""
        if not self._waiting or self.in_flight >= self.max_in_flight:
            return None
        full = sum(r.size for r in self._waiting) >= self.max_group
        lingered = self._clock() - self._waiting[0].at >= self.linger_s
        if self.in_flight and not (full or lingered):
            return None
        group: list[_Request] = []
        size = 0
        while self._waiting and (not group or size + self._waiting[0].size <= self.max_group):
            request = self._waiting.popleft()
            group.append(request)
            size += request.size
        self.in_flight += 1
        return group

    def _wait_s(self) -> float | None:
        """How long a waiter sleeps before it looks again (a group's end also wakes it)."""
        if not self._waiting or self.in_flight >= self.max_in_flight:
            return None
        return max(0.0, self._waiting[0].at + self.linger_s - self._clock())

    def _send(self, group: list[_Request]) -> None:
        writes = [w for r in group for w in r.writes]
        starts = [s for r in group for s in r.starts]
        try:
            outcome = self.store.write_group(writes, starts)
        except BaseException as exc:  # noqa: BLE001 - every request of the group hears of it
            with self._cond:
                for request in group:
                    request.error, request.done = exc, True
            return
        w = s = 0
        with self._cond:
            self.groups += 1
            self.requests += len(group)
            for request in group:
                nw, ns = len(request.writes), len(request.starts)
                request.outcome = GroupOutcome(outcome.written[w : w + nw], outcome.started[s : s + ns])
                request.done = True
                w, s = w + nw, s + ns


class GroupedStore(GroupOfOne):
    """The worker's ``TaskStore``: its starts and end-of-attempt writes go through a ``StoreBatcher``;
    every other call goes straight to the store."""

    def __init__(self, store: TaskStore, batcher: StoreBatcher):
        self.store, self.batcher = store, batcher

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        return self.batcher.submit(writes, starts)

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
    return GroupedStore(store, StoreBatcher(store, linger_s=linger_ms / 1000))
