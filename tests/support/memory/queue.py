"""The TaskQueue port in memory: the Redis adapter's semantics in plain Python, thread-safe.

For unit and property tests and the simulation; it passes the same contract tests as
``RedisTaskQueue``. One lock guards everything, and its Condition wakes ``stage`` on a push.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from docllm.adapters.redis.clock_steps import ClockSteps
from docllm.domain.model import DeadLetter, Delivery, Leftovers, QueueStats
from docllm.domain.payload import task_id_of
from docllm.domain.ports import Clock


@dataclass
class _Lease:
    raw: str
    holder: str
    claimed_at_ms: int
    deadline_ms: int
    task_id: int | None

    def delivery(self, token: str, cancelled: bool = False) -> Delivery:
        return Delivery(self.raw, token, self.deadline_ms, self.holder, self.claimed_at_ms, cancelled)


class InMemoryTaskQueue:
    """Same orders as Redis: ready is claimed from the right and pushed on the left; delayed holds
    one entry per distinct payload (a sorted set's member), ties broken by payload; expired leases
    come by (deadline, token); dead letters newest first."""

    def __init__(
        self,
        clock: Clock,
        token_factory: Callable[[], str] | None = None,
        promote_batch: int = 100,
    ):
        self._clock = clock
        self._leads: dict[str, tuple[str, int]] = {}
        self._new_token = token_factory or (lambda: uuid.uuid4().hex)
        self._promote_batch = promote_batch
        self._changed = threading.Condition()
        self._ready: deque[str] = deque()  # right end: claimed next
        self._leases: dict[str, _Lease] = {}
        self._delayed: dict[str, int] = {}  # payload -> due ms
        self._dead: deque[DeadLetter] = deque()  # left end: newest
        self._staged: list[str] = []  # taken by a blocking claimer, not yet leased
        self._staged_seen: dict[str, int] = {}  # payload -> when unstage first saw it
        # What the original note's workers leave: processing entries without a lease (oldest
        # first) and their processing_ts stamps. A lease's own stamp is implied by the lease.
        self._unleased: list[str] = []
        self._stamps: dict[int, str] = {}
        self._steps = ClockSteps()
        self._cancelled: dict[int, int] = {}  # task id -> when an operator cancelled it

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def push(self, raw: str, front: bool = False) -> None:
        with self._changed:
            self._to_ready(raw, front)

    def _to_ready(self, raw: str, front: bool) -> None:
        if front:
            self._ready.append(raw)
        else:
            self._ready.appendleft(raw)
        self._changed.notify_all()

    def claim(self, holder: str, lease_ms: int) -> Delivery | None:
        found = self.claim_batch(holder, lease_ms, 1)
        return found[0] if found else None

    def claim_batch(self, holder: str, lease_ms: int, limit: int) -> list[Delivery]:
        now = self._clock.now_ms()
        with self._changed:
            self._promote(now, self._promote_batch)
            return [self._lease(self._ready.pop(), holder, now, lease_ms) for _ in range(min(limit, len(self._ready)))]

    def _lease(self, raw: str, holder: str, now: int, lease_ms: int) -> Delivery:
        token = self._new_token()
        lease = _Lease(raw, holder, now, now + lease_ms, task_id_of(raw))
        self._leases[token] = lease
        if lease.task_id is not None:  # stamps are keyed by int task ids only
            self._stamps.pop(lease.task_id, None)  # the claim writes its own stamp over an old one
        return lease.delivery(token, lease.task_id in self._cancelled)

    def stage(self, timeout_s: float) -> str | None:
        with self._changed:
            if timeout_s > 0:
                self._changed.wait_for(lambda: bool(self._ready), timeout=timeout_s)
            if not self._ready:
                return None
            raw = self._ready.pop()
            self._staged.insert(0, raw)
            return raw

    def lease_staged(self, raw: str, holder: str, lease_ms: int) -> Delivery | None:
        now = self._clock.now_ms()
        with self._changed:
            if raw not in self._staged:
                return None
            self._staged.remove(raw)
            self._staged_seen.pop(raw, None)
            return self._lease(raw, holder, now, lease_ms)

    def unstage(self, grace_ms: int, limit: int) -> int:
        now = self._clock.now_ms()
        moved = 0
        with self._changed:
            for raw in list(self._staged[:limit]):
                seen = self._staged_seen[raw] = min(self._staged_seen.get(raw, now), now)
                if now - seen >= grace_ms:
                    self._staged.remove(raw)
                    self._staged_seen.pop(raw)
                    self._to_ready(raw, front=True)
                    moved += 1
            for raw in [r for r in self._staged_seen if r not in self._staged]:
                del self._staged_seen[raw]
        return moved

    def clamp(self, lease_ms: int, max_delay_ms: int, limit: int) -> int:
        now, moved = self._clock.now_ms(), 0
        with self._changed:
            for lease in [lease for lease in self._leases.values() if lease.deadline_ms > now + lease_ms + 1_000]:
                if moved < limit:
                    lease.deadline_ms, moved = now + lease_ms, moved + 1
            far = [raw for raw, due in self._delayed.items() if due > now + max_delay_ms + 1_000][:limit]
            for raw in far:
                self._delayed[raw] = now + max_delay_ms
        return moved + len(far)

    def extend(self, token: str, lease_ms: int) -> bool:
        return self.extend_many([token], lease_ms)[0]

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        now = self._clock.now_ms()
        with self._changed:
            out = []
            for token in tokens:
                lease = self._leases.get(token)
                if lease is not None and self._steps.renewable(lease.deadline_ms, now):
                    lease.deadline_ms = now + lease_ms
                    out.append(True)
                else:
                    out.append(False)
            return out

    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        with self._changed:
            self._steps.record(new_ms, old_ms, since_ms, lease_ms)

    def lease_exists(self, token: str) -> bool:
        with self._changed:
            return token in self._leases

    def ack(self, token: str) -> bool:
        with self._changed:
            return self._leases.pop(token, None) is not None

    def retry_later(self, token: str, delay_ms: int) -> bool:
        due = self._clock.now_ms() + max(0, delay_ms)
        with self._changed:
            lease = self._leases.pop(token, None)
            if lease is None:
                return False
            self._delayed[lease.raw] = due
            return True

    def requeue(self, token: str, front: bool = False) -> bool:
        with self._changed:
            lease = self._leases.pop(token, None)
            if lease is None:
                return False
            self._to_ready(lease.raw, front)
            return True

    def dead_letter(
        self, token: str | None, raw: str, reason: str, task_id: int | None = None, unless_lettered: bool = False
    ) -> bool:
        now = self._clock.now_ms()
        with self._changed:
            if token is not None:
                lease = self._leases.pop(token, None)
                if lease is None:
                    return False
                raw = lease.raw  # the queue's own copy
                task_id = lease.task_id if task_id is None else task_id
            elif unless_lettered and task_id is not None and any(d.task_id == task_id for d in self._dead):
                return False
            self._dead.appendleft(DeadLetter(raw=raw, reason=reason, at_ms=now, task_id=task_id))
            return True

    def expired(self, limit: int, start: float = 0.0) -> list[Delivery]:
        now = self._clock.now_ms()
        with self._changed:
            if self._steps.quiet(now) is not None:
                return []
            late = sorted(
                (lease.deadline_ms, token) for token, lease in self._leases.items() if lease.deadline_ms < now
            )
            first = int(start * max(0, len(late) - limit))
            return [self._leases[token].delivery(token) for _, token in late[first : first + max(0, limit)]]

    def in_flight(self, limit: int) -> list[Delivery]:
        with self._changed:
            oldest = sorted((lease.claimed_at_ms, token) for token, lease in self._leases.items())
            return [self._leases[token].delivery(token) for _, token in oldest[: max(0, limit)]]

    def promote_due(self, limit: int) -> int:
        now = self._clock.now_ms()
        with self._changed:
            return self._promote(now, limit)

    def _promote(self, now: int, limit: int) -> int:
        due = sorted((at, raw) for raw, at in self._delayed.items() if at <= now)[: max(0, limit)]
        for _, raw in due:
            del self._delayed[raw]
            self._to_ready(raw, front=False)
        return len(due)

    def referenced_task_ids(self) -> set[int]:
        with self._changed:
            raws = [*self._delayed, *self._ready, *self._staged, *(lease.raw for lease in self._leases.values())]
        return {tid for tid in map(task_id_of, raws) if tid is not None}

    def referenced_page(self, cursor: Any, limit: int) -> tuple[set[int], Any]:
        return self.referenced_task_ids(), None  # in memory a lap is one page

    def lead(self, role: str, holder: str, ttl_ms: int) -> bool:
        now = self._clock.now_ms()
        with self._changed:
            current, until = self._leads.get(role, (None, 0))
            if current not in (None, holder) and until > now:
                return False
            self._leads[role] = (holder, now + ttl_ms)
            return True

    def leftovers(self, limit: int) -> Leftovers:
        with self._changed:
            named = {lease.task_id for lease in self._leases.values()}
            stamps = sorted((tid, value) for tid, value in self._stamps.items() if tid not in named)
            return Leftovers(tuple(self._unleased[: max(0, limit)]), tuple(stamps[: max(0, limit)]))

    def release_leftovers(self, payloads: Sequence[str], stamps: Sequence[tuple[int, str]], seen_at_ms: int) -> int:
        """Like the script: a payload whose task was claimed in ``seen_at_ms``'s second or later
        stays (the script cannot tell a leased copy from a lease-less one; here it is only cautious)."""
        moved, since = 0, seen_at_ms // 1000
        with self._changed:
            recent = {lease.task_id for lease in self._leases.values() if lease.claimed_at_ms // 1000 >= since}
            for raw in payloads:
                if raw in self._unleased and task_id_of(raw) not in recent:
                    self._unleased.remove(raw)
                    self._to_ready(raw, front=True)
                    moved += 1
            for task_id, value in stamps:
                if self._stamps.get(task_id) == value:
                    del self._stamps[task_id]
        return moved

    # -- what the original note's workers do, for the tests and the simulation ---------------
    def original_take(self, stamp: str | None = None) -> str | None:
        """``BRPOPLPUSH ready processing`` (no lease), then ``HSET processing_ts`` when ``stamp``."""
        with self._changed:
            if not self._ready:
                return None
            raw = self._ready.pop()
            self._unleased.append(raw)
            task_id = task_id_of(raw)
            if stamp is not None and task_id is not None:
                self._stamps[task_id] = stamp
            return raw

    def original_stamp(self, task_id: int, stamp: str) -> None:
        """``HSET processing_ts task_id stamp`` alone (its payload already gone)."""
        with self._changed:
            self._stamps[task_id] = stamp

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        with self._changed:
            return list(self._dead)[: max(0, limit)]

    def remove_dead_letters(self, task_ids: Collection[int] | None) -> list[DeadLetter]:
        wanted = None if task_ids is None else set(task_ids)
        with self._changed:
            removed = [d for d in self._dead if wanted is None or d.task_id in wanted]
            self._dead = deque(d for d in self._dead if not (wanted is None or d.task_id in wanted))
            return removed

    def mark_cancelled(self, task_ids: Collection[int]) -> None:
        now = self._clock.now_ms()
        with self._changed:
            self._cancelled.update({int(t): now for t in task_ids})

    def cancel_marks(self, task_ids: Collection[int]) -> set[int]:
        with self._changed:
            return {int(t) for t in task_ids if int(t) in self._cancelled}

    def clear_cancelled(self, task_ids: Collection[int]) -> None:
        with self._changed:
            for t in task_ids:
                self._cancelled.pop(int(t), None)

    def stats(self) -> QueueStats:
        with self._changed:
            oldest = min((lease.claimed_at_ms for lease in self._leases.values()), default=None)
            return QueueStats(len(self._ready), len(self._leases), len(self._delayed), len(self._dead), oldest)
