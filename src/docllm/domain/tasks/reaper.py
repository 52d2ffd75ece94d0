"""The reaper: settles expired leases from what the row says (DESIGN section 5, reap).

Only expired leases are read (O(log n + expired), D8). Every decision is re-taken from the row on
each visit, so a reaper that crashed half way is finished by the next one, and several reapers
may run at once: the fenced row write and the token-checked queue move each happen once.
"""

from __future__ import annotations

import random
from typing import Protocol

from docllm.domain import events as ev
from docllm.domain.batches.model import BatchMember, BatchState
from docllm.domain.batches.ports import BatchStore
from docllm.domain.errors import BadPayload, TransientError
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.llm.ledger import attempt_key
from docllm.domain.llm.spend_ledger import SpendLedger
from docllm.domain.tasks.model import Delivery, Task, TaskStatus
from docllm.domain.tasks.outcome import ORPHANED_REASON, Reason
from docllm.domain.tasks.payload import parse_payload
from docllm.domain.tasks.policies import LeasePolicy, Limits, RetryPolicy
from docllm.domain.tasks.ports import Leases, Recovery, TaskStore
from docllm.domain.tracing import NullTracer, Tracer, current, running

LEASE_EXPIRED = "lease expired: the worker stopped heartbeating"
BATCH_LEASE_EXPIRED = "lease expired while its batch was polled (a poller stopped): handed back uncharged"


class ReaperQueue(Recovery, Leases, Protocol):
    """The queue roles the reaper uses: find what needs recovery, and end an expired lease."""


class Reaper:
    def __init__(
        self,
        queue: ReaperQueue,
        repo: TaskStore,
        retry: RetryPolicy,
        max_payload_bytes: int = Limits.max_payload_bytes,
        batch: int = 100,
        events: EventSink | None = None,
        worker_id: str = "reaper",
        lease_ms: int = LeasePolicy().lease_ms,
        rng: random.Random | None = None,
        tracer: Tracer | None = None,
        batches: BatchStore | None = None,
        ledger: SpendLedger | None = None,
    ):
        self.queue, self.repo, self.retry = queue, repo, retry
        self.ledger = ledger  # the spend ledger (I16): a reclaimed attempt's hold is released at once
        self.max_payload_bytes, self.batch, self.worker_id = max_payload_bytes, batch, worker_id
        self.events = events or NullEvents()
        self.lease_ms = lease_ms
        self.rng = rng or random.Random()
        self.tracer = tracer or NullTracer()
        self.batches = batches  # the batch lane's record (issue 28); None: no batches

    def reap_once(self) -> int:
        """One cycle: move due retries to ready, payloads a dead claimer left staged back to ready
        (D1), deadlines a backward clock step pushed out back in, then settle up to ``batch``
        expired leases."""
        self.queue.promote_due(self.batch)
        self.queue.unstage(self.lease_ms, self.batch)
        # A backward step of the authority clock (DESIGN section 6) would push every deadline out.
        self.queue.clamp(self.lease_ms, int(self.retry.cap_seconds * 1000), self.batch)
        # From a random point of the backlog, so that reapers running at once take different
        # batches instead of racing for the same oldest ones. A backlog no larger than one batch
        # is taken whole, by every reaper alike.
        expired = self.queue.expired(self.batch, start=self.rng.random())
        for delivery in expired:
            try:
                self.settle(delivery)
            except TransientError:  # Unavailable: the infrastructure, not the task (I9); back off
                raise
            except Exception as exc:  # noqa: BLE001 - one lease that cannot be settled must not block the rest
                error = f"could not be settled: {type(exc).__name__}: {exc}"
                self._dead_letter(delivery, Reason.unsettled, error, None)
        return len(expired)

    def settle(self, delivery: Delivery) -> None:
        try:
            ref = parse_payload(delivery.raw, self.max_payload_bytes)
        except BadPayload as exc:
            self._dead_letter(delivery, Reason.malformed_payload, f"malformed payload: {exc}", None)
            return
        # One span per settled lease, linked to the task's trace (what the reaper did is its
        # ``docllm.action``, set by ``_did``).
        span = self.tracer.start("docllm.reap", link=ref.traceparent)
        if span.recording:
            span.set({"docllm.task_id": ref.task_id, "docllm.worker": self.worker_id})
        with running(span):
            # A fenced write that finds the row changed is not a reason to skip (D2): look again.
            for _ in range(3):
                if self._settle_once(delivery, ref.task_id):
                    return

    def _did(self, event: str, **fields: object) -> None:
        """Report an action: as an event, and on the reap span of the lease being settled."""
        self.events.emit(event, **fields)
        span = current()
        if span.recording:
            span.set({"docllm.action": event, **{f"docllm.{k}": str(v) for k, v in fields.items() if k != "task_id"}})

    def _settle_once(self, delivery: Delivery, task_id: int) -> bool:
        """Settle one expired lease from what the row says; False when a fenced write found the
        row changed under it (look again)."""
        row = self.repo.get(task_id)
        if row is None:
            self._dead_letter(delivery, Reason.unknown_task, f"unknown task: no row with task_id {task_id}", task_id)
            return True
        if row.status is not TaskStatus.processing:
            self._settle_not_running(delivery, row)
            return True
        if row.lease_token != delivery.token:
            return self._settle_other_attempts_lease(delivery, row)
        return self._reclaim(delivery, row)

    def _settle_not_running(self, delivery: Delivery, row: Task) -> None:
        """The row is not processing: the lease outlived a finished attempt, or one never started."""
        if row.status is TaskStatus.success:
            self.queue.ack(delivery.token)  # committed, then crashed before its ack
        elif row.status is TaskStatus.failed:
            self._dead_letter(delivery, Reason.task_failed, row.error or "failed", row.task_id)  # failed, then crashed
        elif self.queue.requeue(delivery.token):
            # Pending: claimed but never started (D2), or a reaper died between its row write and this move.
            self._did(ev.REQUEUED, task_id=row.task_id, reason=Reason.never_started, worker=self.worker_id)

    def _settle_other_attempts_lease(self, delivery: Delivery, row: Task) -> bool:
        """The row is processing under another lease than this one."""
        if row.lease_token is not None and not self.queue.lease_exists(row.lease_token):
            # The row's attempt has no lease: its start landed but its answer was lost, and its
            # payload went back to the queue. This payload is the only one left, so hand the row
            # back uncharged, fenced on that attempt, and requeue rather than ack.
            if not self.repo.hand_back(row.task_id, row.attempt, ORPHANED_REASON):
                return False
            self._release(row)
            self.queue.requeue(delivery.token, front=True)
            self._did(ev.REQUEUED, task_id=row.task_id, reason=Reason.orphaned, worker=self.worker_id)
            return True
        # A newer attempt holds the row; this lease is an old duplicate.
        self.queue.ack(delivery.token)
        self._did(ev.STALE_LEASE_DROPPED, task_id=row.task_id, worker=self.worker_id)
        return True

    def _reclaim(self, delivery: Delivery, row: Task) -> bool:
        """This lease's own attempt died: charge it, then requeue or, at the budget, fail. An
        attempt its unfinished batch runs is handed back instead (its poller died, or fell behind:
        not the document's doing), counted towards its bounded hand-backs (I12)."""
        task_id = row.task_id
        if row.handbacks < self.retry.max_handbacks and self._batched(row):
            if not self.repo.hand_back(task_id, row.attempt, BATCH_LEASE_EXPIRED, counted=True):
                return False
            self._release(row)
            self.queue.requeue(delivery.token, front=True)
            reason, worker = Reason.lease_expired, self.worker_id
            self._did(ev.REQUEUED, task_id=task_id, attempt=row.attempt, reason=reason, worker=worker)
            return True
        if row.last_attempt(self.retry.max_attempts):
            error = f"attempts exhausted ({row.retry_count + 1}/{row.budget(self.retry.max_attempts)}): {LEASE_EXPIRED}"
            if not self.repo.fail(task_id, row.attempt, error):
                return False
            self._release(row)
            self._dead_letter(delivery, Reason.attempts_exhausted, error, task_id)
            return True
        if not self.repo.retry(task_id, row.attempt, LEASE_EXPIRED):
            return False
        self._release(row)
        # The lease already spaced this attempt from the next one: no backoff on top, so that a
        # crashed worker's task runs again within lease + reaper interval (a waiting slot's BLMOVE
        # wakes at once). The attempt budget still ends a task that keeps killing its workers.
        self.queue.requeue(delivery.token, front=True)
        self._did(
            ev.RECLAIMED,
            task_id=task_id,
            attempt=row.attempt,
            reason=Reason.lease_expired,
            delay_s=0.0,
            worker=self.worker_id,
        )
        return True

    def _release(self, row: Task) -> None:
        """The dead attempt's spend reservation goes now, not when it lapses: its write can no
        longer land, so nothing it spent will be counted (docs/RELIABILITY.md, the spend ledger)."""
        if self.ledger is not None:
            self.ledger.release(attempt_key(row.task_id, row.attempt))

    def _batched(self, row: Task) -> bool:
        """Whether an unfinished batch runs this attempt of the task, or a batch that ended
        ``returned`` ran it (its members were to be handed back uncharged: a poller that found this
        member's lease already lapsed, e.g. after a database outage kept every poller from renewing
        it, returned the batch without it)."""
        if self.batches is None:
            return False
        for ref in self.batches.of_task(row.task_id)[:3]:  # newest first: its current batch, if any
            batch = self.batches.get(ref)
            running = batch is not None and batch.state is not BatchState.applied
            if running and batch is not None and BatchMember(row.task_id, row.attempt) in batch.members:
                return True
        return False

    def _dead_letter(self, delivery: Delivery, reason: Reason, error: str, task_id: int | None) -> None:
        if self.queue.dead_letter(delivery.token, delivery.raw, error, task_id):
            self._did(ev.DEAD_LETTERED, task_id=task_id, reason=reason, error=error, worker=self.worker_id)
