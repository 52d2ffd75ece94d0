"""The leftover sweep: what the original note's workers left in Redis goes back to work
(ARCHITECTURE.md, Switching over).

Those workers claim with ``BRPOPLPUSH ready processing`` and ``HSET processing_ts``, with no
lease; one that dies leaves its payload in processing and its stamp behind for good (D1, D2, D3),
where no reaper looks. docllm's own claims always come with a lease, so an entry that no lease
holds is such a leftover. The reconciler runs this sweep at its low rate (it reads what is in
flight, D8). An item seen in two sweeps at least ``grace`` apart (authority clock) is released:
the payload to the claim end of ready, the stamp deleted. A row the old worker had marked
``processing`` (docllm never leaves one without a lease token) is first handed back to pending,
fenced on its attempt, so that the released payload starts at once instead of meeting a busy row.
Several processes may sweep at once: the release never takes a leased copy (the queue checks that
no claim of the task happened since this sweep's sighting), and a payload delivered twice, say by
the reconciler and by this sweep, starts one attempt: the other delivery finds the row busy or
finished (fencing).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from docllm.domain import events as ev
from docllm.domain.errors import BadPayload
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.payload import parse_payload
from docllm.domain.tasks.ports import Clock, OriginalLeftovers, TaskRepository

HANDED_BACK = "recovered from the original deployment: its worker stopped mid-task"
K = TypeVar("K", bound=Hashable)


class LeftoverSweep:
    def __init__(
        self,
        queue: OriginalLeftovers,
        repo: TaskRepository,
        clock: Clock,
        grace_ms: int,
        limit: int = 1000,
        page: int = 100,
        events: EventSink | None = None,
    ):
        self.queue, self.repo, self.clock = queue, repo, clock
        self.grace_ms, self.limit, self.page = grace_ms, limit, page
        self.events = events or NullEvents()
        self._payloads: dict[tuple[str, int], int] = {}  # (payload, copy) -> first seen (ms)
        self._stamps: dict[tuple[int, str], int] = {}  # (task_id, value) -> first seen (ms)

    def sweep_once(self) -> int:
        """One sweep; returns how many payloads went back to ready."""
        now = self.clock.now_ms()  # before the snapshot: see release_leftovers
        found = self.queue.leftovers(self.limit)
        payloads = [raw for raw, _ in _due(self._payloads, _copies(found.payloads), now, self.grace_ms)]
        stamps = _due(self._stamps, found.stamps, now, self.grace_ms)
        if not payloads and not stamps:
            return 0
        self._hand_back(payloads)
        # Stamps first: a leftover's own stamp, left in place, would read as a claim since ``now``.
        for start in range(0, len(stamps), self.page):
            self.queue.release_leftovers((), stamps[start : start + self.page], now)
        moved = 0
        for start in range(0, len(payloads), self.page):
            moved += self.queue.release_leftovers(payloads[start : start + self.page], (), now)
        self.events.emit(ev.LEFTOVER_RELEASED, payloads=moved, stamps=len(stamps))
        return moved

    def _hand_back(self, payloads: Sequence[str]) -> None:
        ids = []
        for raw in payloads:
            try:
                ids.append(parse_payload(raw, max_bytes=sys.maxsize).task_id)
            except BadPayload:
                pass  # released all the same: the worker that claims it dead-letters it (I7)
        for row in self.repo.get_many(ids):
            legacy = row.status is TaskStatus.processing and row.lease_token is None
            if legacy and self.repo.hand_back(row.task_id, row.attempt, HANDED_BACK):
                self.events.emit(ev.RECONCILED, task_id=row.task_id, status=row.status.value)


def _copies(payloads: Iterable[str]) -> list[tuple[str, int]]:
    """Each payload with its copy number, so that two lease-less copies are two items."""
    seen: dict[str, int] = {}
    out = []
    for raw in payloads:
        seen[raw] = seen.get(raw, -1) + 1
        out.append((raw, seen[raw]))
    return out


def _due(first_seen: dict[K, int], items: Iterable[K], now: int, grace_ms: int) -> list[K]:
    """Items present now that were also present at a sweep at least ``grace_ms`` ago. Forgets the
    items not present now, so that ``first_seen`` holds only current leftovers, and an item that
    went away and came back starts over."""
    previous = dict(first_seen)
    first_seen.clear()
    due = []
    for item in items:
        # min(): a sighting "in the future" means the authority's clock stepped back; count from now.
        first_seen[item] = since = min(previous.get(item, now), now)
        if item in previous and now - since >= grace_ms:
            due.append(item)
    return due
