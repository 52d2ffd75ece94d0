"""Port wrappers that watch the product's calls: they log each call to the trace and keep the
ledger in step with what the real adapters answered (I4, I5 and I8 are checked right here, at
the call that breaks them). They sit under the crash and outage wrappers, so a call that a
crash stopped never reaches them.

``Gate`` is the outage wrapper: while its service is down every call raises ``Unavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from docllm.domain.errors import Unavailable
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import Delivery, FencedWrite, GroupOutcome, StartRequest, StartResult, WriteKind
from docllm.domain.tasks.outcome import CANCELLED_ERROR
from docllm.domain.tasks.payload import task_id_of
from sim.fault_injection import group_of
from sim.ledger import FAILED, PENDING, Ledger

task_of = task_id_of  # the one payload -> task id helper, under the name the simulation uses


class Gate:
    """Raises ``error()`` on every public call while ``down[service]`` is set, and says so in the
    trace (naming the task when the first argument is a task id or a known lease token)."""

    def __init__(
        self, target: Any, down: dict[str, bool], service: str, ledger: Ledger, error: type[Exception] = Unavailable
    ):
        self._target, self._down, self._service, self._error = target, down, service, error
        self._ledger = ledger

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if attr.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._down[self._service]:
                first = args[0] if args else None
                if isinstance(first, (list, tuple)):  # a batch (extend_many, write_group): name its first task
                    first = first[0] if first else (args[1][0] if len(args) > 1 and args[1] else None)
                first = getattr(first, "task_id", first)  # a grouped write or start names its task
                task = first if isinstance(first, int) else self._ledger.token_task.get(first)
                self._ledger.world.log("call", f"{attr} -> {self._error.__name__} ({self._service} is down)", task)
                raise self._error(f"{self._service} is unavailable (simulated outage)")
            return value(*args, **kwargs)

        return call


class QueueObserver:
    def __init__(self, queue: Any, ledger: Ledger, system: Any):
        self._q, self._l, self._s = queue, ledger, system
        self._log = ledger.world.log

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._q, attr)

    def push(self, raw: str, front: bool = False) -> None:
        self._q.push(raw, front)
        self._s.ready_dirty = True
        self._log("call", f"queue.push {raw[:60]!r}", task_of(raw))

    def claim(self, worker_id: str, lease_ms: int) -> Delivery | None:
        found = self.claim_batch(worker_id, lease_ms, 1)
        return found[0] if found else None

    def claim_batch(
        self, worker_id: str, lease_ms: int, limit: int, lanes: tuple[str, ...] | None = None
    ) -> list[Delivery]:
        found = self._q.claim_batch(worker_id, lease_ms, limit, lanes)
        self._s.ready_dirty = True  # the claim script promotes due retries first
        self._s.lane_watch.claimed([d.raw for d in found])  # I13 (sim/lanes.py)
        for delivery in found:
            self._claimed(delivery, "queue.claim")
        return found

    def stage(self, timeout_s: float) -> str | None:
        raw = self._q.stage(timeout_s)
        if raw is not None:
            self._log("call", f"queue.stage {raw[:60]!r}", task_of(raw))
            self._l.moved(task_of(raw))
        return raw

    def lease_staged(self, raw: str, worker_id: str, lease_ms: int) -> Delivery | None:
        delivery = self._q.lease_staged(raw, worker_id, lease_ms)
        if delivery is not None:
            self._claimed(delivery, "queue.lease_staged")
        return delivery

    def unstage(self, grace_ms: int, limit: int) -> int:
        moved = self._q.unstage(grace_ms, limit)
        if moved:
            self._s.ready_dirty = True
            self._log("call", f"queue.unstage -> {moved} back to ready")
        return moved

    def _claimed(self, delivery: Delivery, what: str) -> None:
        task_id = task_of(delivery.raw)
        self._log("call", f"{what} -> {delivery.token}", task_id)
        self._l.renew[delivery.token] = self._l.token_claimed[delivery.token] = self._l.world.now
        self._l.token_task[delivery.token] = task_id
        self._l.token_holder[delivery.token] = delivery.worker_id
        self._l.mark(task_id, "claim")
        self._l.moved(task_id)

    def extend(self, token: str, lease_ms: int) -> bool:
        return self.extend_many([token], lease_ms)[0]

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        renewed = self._q.extend_many(tokens, lease_ms)
        for token, ok in zip(tokens, renewed, strict=True):
            self._log("call", f"queue.extend {token} -> {ok}", self._l.token_task.get(token))
            if ok:
                self._l.renewed(token)
        return renewed

    def ack(self, token: str) -> bool:
        return self.ack_many([token])[0]

    def ack_many(self, tokens: list[str]) -> list[bool]:
        acked = self._q.ack_many(tokens)
        for token, ok in zip(tokens, acked, strict=True):
            self._log("call", f"queue.ack {token} -> {ok}", self._l.token_task.get(token))
        return acked

    def retry_later(self, token: str, delay_ms: int) -> bool:
        ok = self._q.retry_later(token, delay_ms)
        self._log("call", f"queue.retry_later {token} +{delay_ms}ms -> {ok}", self._l.token_task.get(token))
        return ok

    def requeue(self, token: str, front: bool = False) -> bool:
        ok = self._q.requeue(token, front)
        self._log("call", f"queue.requeue {token} -> {ok}", self._l.token_task.get(token))
        if ok:
            self._s.ready_dirty = True
        return ok

    def dead_letter(
        self, token: str | None, raw: str, reason: str, task_id: int | None = None, unless_lettered: bool = False
    ) -> bool:
        ok = self._q.dead_letter(token, raw, reason, task_id, unless_lettered)
        self._log("call", f"queue.dead_letter {token} ({reason[:60]}) -> {ok}", task_id)
        if ok:
            self._l.dead_lettered(raw, task_id)
        return ok

    def expired(self, limit: int, start: float = 0.0) -> list[Delivery]:
        found = self._q.expired(limit, start)
        if found:
            self._log("call", f"queue.expired -> {[d.token for d in found]}")
        return found

    def promote_due(self, limit: int) -> int:
        moved = self._q.promote_due(limit)
        if moved:
            self._s.ready_dirty = True
            self._log("call", f"queue.promote_due -> {moved}")
        return moved


class RepoObserver:
    def __init__(self, repo: Any, ledger: Ledger, budget: int):
        self._r, self._l, self._budget = repo, ledger, budget
        self._log = ledger.world.log

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._r, attr)

    def create(
        self,
        task_name: str,
        document: str,
        max_attempts: int | None = None,
        rubric: str | None = None,
        priority: str | None = None,
        tenant: str | None = None,
        traceparent: str | None = None,
    ):
        task = self._r.create(task_name, document, max_attempts, rubric, priority, tenant, traceparent)
        self._log("call", f"repo.create -> task {task.task_id} {task_name}", task.task_id)
        self._l.created(task.task_id, task_name)
        return task

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        """The store's grouped write (one transaction): the ledger hears of each row it wrote, in
        the group's order (its writes, then its starts), as it would of one row at a time."""
        outcome = self._r.write_group(writes, starts)
        if len(writes) + len(starts) > 1:
            self._log("call", f"repo.write_group of {len(writes)} writes and {len(starts)} starts")
        for write, ok in zip(writes, outcome.written, strict=True):
            self._wrote(write, ok)
        for start, started in zip(starts, outcome.started, strict=True):
            self._started(start.task_id, start.token, started)
        return outcome

    def start_attempt(self, task_id: int, token: str):
        outcome = self._r.start_attempt(task_id, token)
        self._started(task_id, token, outcome)
        return outcome

    def _started(self, task_id: int, token: str, outcome: Any) -> None:
        self._log(
            "call",
            f"repo.start_attempt {token} -> {outcome.result.value}"
            f"{f' attempt {outcome.task.attempt}' if outcome.task else ''}",
            task_id,
        )
        book = self._l.book(task_id)
        if outcome.result is StartResult.started and book is not None and book.token != token:
            self._l.check_cancel(book, "start")
            self._l.started(book, outcome.task.attempt, token, self._budget)

    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        ok = self._r.commit(task_id, attempt, result, usage=usage)
        self._wrote(FencedWrite(WriteKind.commit, task_id, attempt, result=result, usage=usage), ok)
        return ok

    def retry(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        ok = self._r.retry(task_id, attempt, error, usage=usage)
        self._wrote(FencedWrite(WriteKind.retry, task_id, attempt, error=error, usage=usage), ok)
        return ok

    def hand_back(
        self, task_id: int, attempt: int, why: str, usage: Usage | None = None, counted: bool = False
    ) -> bool:
        ok = self._r.hand_back(task_id, attempt, why, usage=usage, counted=counted)
        self._wrote(FencedWrite(WriteKind.hand_back, task_id, attempt, error=why, usage=usage, counted=counted), ok)
        return ok

    def fail(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        ok = self._r.fail(task_id, attempt, error, usage=usage)
        self._wrote(FencedWrite(WriteKind.fail, task_id, attempt, error=error, usage=usage), ok)
        return ok

    def _wrote(self, write: FencedWrite, ok: bool) -> None:
        """The ledger's record of one fenced end-of-attempt write (whether it landed: ``ok``)."""
        task_id, attempt, error = write.task_id, write.attempt, write.error or ""
        if write.kind is WriteKind.commit:
            self._log("call", f"repo.commit attempt {attempt} -> {ok}", task_id)
        else:
            self._log("call", f"repo.{write.kind.value} attempt {attempt} ({error[:50]}) -> {ok}", task_id)
        book = self._l.book(task_id)
        if not ok or book is None:
            return
        if write.kind is WriteKind.commit:
            self._l.check_cancel(book, "commit")
            self._l.committed(book, attempt)
        elif write.kind is WriteKind.retry:
            self._l.fenced_write(book, attempt, "retry")
            self._charged(book, attempt, error)
            self._l.set_status(book, PENDING)
            self._l.mark(task_id, "retry")
        elif write.kind is WriteKind.hand_back:
            self._l.fenced_write(book, attempt, "retry")
            book.counted -= 1
            token = book.token if book.attempt == attempt else None
            self._l.handed.append((self._l.world.now, task_id, attempt, token, error, write.counted))
            if write.counted:
                book.handbacks += 1
            self._l.set_status(book, PENDING)
            self._l.mark(task_id, "release")
        else:
            self._l.fenced_write(book, attempt, "fail")
            if error == CANCELLED_ERROR:
                self._l.cancelled(book)
            self._charged(book, attempt, error)
            self._l.set_status(book, FAILED)
            self._l.mark(task_id, "failed")

    def cancel_pending(self, task_id: int, attempt: int, error: str) -> bool:
        ok = self._r.cancel_pending(task_id, attempt, error)
        self._log("call", f"repo.cancel_pending attempt {attempt} -> {ok}", task_id)
        book = self._l.book(task_id)
        if ok and book is not None:
            if book.status != PENDING:
                self._l.violate("I4", task_id, f"a cancel of a pending row landed on a {book.status} one")
            self._l.cancelled(book)
        return ok

    def _charged(self, book: Any, attempt: int, error: str) -> None:
        token = book.token if book.attempt == attempt else None
        self._l.charged.append((self._l.world.now, book.task_id, attempt, token, error))

    def reopen(self, task_id: int) -> bool:
        ok = self._r.reopen(task_id)
        self._log("call", f"repo.reopen -> {ok}", task_id)
        book = self._l.book(task_id)
        if ok and book is not None:
            book.counted = book.handbacks = book.llm_handbacks = 0  # the row's retry_count and handbacks too
            book.cancelled, book.cancel_marked_at = False, None
            self._l.set_status(book, PENDING)
        return ok

    def get(self, task_id: int):
        row = self._r.get(task_id)
        self._log(
            "call", f"repo.get -> {row.status.value if row else None} attempt {row.attempt if row else '-'}", task_id
        )
        return row


WRITES = frozenset({"start_attempt", "commit", "retry", "fail", "reopen", "delete", "write_group"})


class StuckBeats:
    """The "stops heartbeating but keeps working" fault on a queue: while the actor's
    ``no_beat_until`` lies ahead, renewals are not sent and the runtime is told they went through
    (a stuck heartbeat, not a lost one). Armed per actor by the fault plan (``no_beat``)."""

    def __init__(self, target: Any, actor: Any):
        self._target, self._actor = target, actor

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        if self._actor.world.now < self._actor.no_beat_until:
            return [True] * len(tokens)
        return self._target.extend_many(tokens, lease_ms)  # type: ignore[no-any-return]

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._target, attr)


class LostReplies:
    """A database write that lands, and whose reply never comes back: the connection dropped after
    the commit, and the adapter's own retries ran out. The caller gets ``Unavailable`` for a write
    that happened (issue 13 item 1). Armed per actor by the fault plan (``lost_reply``)."""

    def __init__(self, target: Any, actor: Any):
        self._target, self._actor = target, actor

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if attr not in WRITES:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            actor = self._actor
            writes, starts = group_of(args, kwargs) if attr == "write_group" else ((), ())
            if starts and actor.lost_start_replies > 0:
                actor.lost_start_replies -= 1
            elif actor.lost_replies > 0:
                actor.lost_replies -= 1
            else:
                return result
            task = args[0] if args and isinstance(args[0], int) else None
            held = f" ({len(writes)} writes, {len(starts)} starts)" if attr == "write_group" else ""
            actor.world.log("call", f"repo.{attr}{held} landed; its reply is lost", task)
            if actor.kind == "reaper":  # its cycle failed: as if the database were down for one
                now = actor.world.now
                actor.world.windows.add("db", now, now + actor.sys.interval_ms)
            raise Unavailable(f"the database's reply to {attr} was lost after the write landed (simulated)")

        return call
