"""One attempt, step by step: claim, begin, heartbeat, review, finish.

The steps are separate calls so that a runtime (one event loop in production, the same loop on
virtual time in the simulation) can interleave them with other actors and crash between any two of them. Each step is
safe to lose: whatever a crash leaves behind is a lease that expires and is settled by the reaper.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from docllm.domain import events as ev
from docllm.domain.errors import BadLabel, BadPayload, RubricError, Unavailable, Unstorable
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.llm.budget import Settle
from docllm.domain.llm.spend_ledger import Purse, SpendLedger, shares, spending
from docllm.domain.llm.usage import metering
from docllm.domain.review.ports import DocumentReviewer, RubricCatalog, review_with
from docllm.domain.review.rubric import Rubric
from docllm.domain.tasks.model import (
    Attempt,
    Delivery,
    FencedWrite,
    StartOutcome,
    StartRequest,
    StartResult,
    Task,
    TaskRef,
    TaskStatus,
    WriteKind,
)
from docllm.domain.tasks.outcome import CANCELLED_ERROR, ORPHANED_REASON, Outcome, OutcomeKind, Reason
from docllm.domain.tasks.payload import named_task_id, parse_payload
from docllm.domain.tasks.policies import LeasePolicy, Limits, RetryPolicy
from docllm.domain.tasks.ports import CancelMarks, Claims, Clock, Leases, TaskStore
from docllm.domain.tasks.storable import storable_report
from docllm.domain.tasks.verdict import Facts, Happened, decide, facts_of
from docllm.domain.tracing import NullTracer, Span, Tracer, traced, within


class AttemptQueue(Claims, Leases, CancelMarks, Protocol):
    """The queue roles an attempt uses: claim a payload, hold and end its lease, read its cancel mark."""


class TaskProcessor:
    def __init__(
        self,
        queue: AttemptQueue,
        repo: TaskStore,
        reviewer: DocumentReviewer,
        clock: Clock,
        retry: RetryPolicy,
        lease: LeasePolicy,
        worker_id: str,
        limits: Limits = Limits(),
        events: EventSink | None = None,
        rubrics: RubricCatalog | None = None,
        tracer: Tracer | None = None,
        ledger: SpendLedger | None = None,
    ):
        self.queue, self.repo, self.reviewer, self.clock = queue, repo, reviewer, clock
        self.ledger = ledger  # the spend ledger (I16): reserve before the review, settle each write that landed
        self.retry, self.lease, self.worker_id, self.limits = retry, lease, worker_id, limits
        self.events = events or NullEvents()
        self.rubrics = rubrics
        self.tracer = tracer or NullTracer()

    # -- claim and begin ---------------------------------------------------------------------
    def claim(self) -> Delivery | None:
        found = self.claim_batch(1)
        return found[0] if found else None

    def claim_batch(self, limit: int, lanes: tuple[str, ...] | None = None) -> list[Delivery]:
        """Up to ``limit`` deliveries in one round trip: a dispatcher claims its free slots at once.
        ``lanes``: from these lanes only (the batch lane's batcher); None: the queue's policy."""
        if lanes is None:  # the realtime dispatcher's call, as it always was
            return self._claimed(self.queue.claim_batch(self.worker_id, self.lease.lease_ms, limit))
        return self._claimed(self.queue.claim_batch(self.worker_id, self.lease.lease_ms, limit, lanes))

    def wait_claim(self, timeout_s: float) -> list[Delivery]:
        """Block until ready has a payload (``timeout_s`` at most), then lease it. A crash between
        the two steps leaves it staged, and the reaper's ``unstage`` puts it back (D1)."""
        raw = self.queue.stage(timeout_s)
        if raw is None:
            return []
        delivery = self.queue.lease_staged(raw, self.worker_id, self.lease.lease_ms)
        return self._claimed([delivery] if delivery is not None else [])

    def _claimed(self, deliveries: list[Delivery]) -> list[Delivery]:
        for delivery in deliveries:
            self.events.emit(ev.CLAIMED, token=delivery.token, worker=self.worker_id)
        return deliveries

    def begin(self, delivery: Delivery) -> Attempt | None:
        """Start the attempt on the row (fenced), or settle a delivery that must not run."""
        begun = self.begin_batch([delivery])[0]
        if isinstance(begun, Unavailable):
            raise begun
        return begun

    def begin_batch(self, deliveries: Sequence[Delivery]) -> list[Attempt | None | Unavailable]:
        """Start a claimed batch: the starts of its rows go to the store as one group (one
        transaction, each row fenced on its own status), then each delivery is settled as a lone
        one would be. Per delivery: its attempt, None (dead-lettered, a duplicate, cancelled), or
        the ``Unavailable`` that stopped it (the caller hands that one back), so one row's trouble
        never strands the rest of the batch. A crash anywhere leaves leases the reaper settles."""
        opened = time.time_ns()  # a record for the trace (the claim's span starts here), no decision
        refs = [self._ref(delivery) for delivery in deliveries]
        requests = [StartRequest(ref.task_id, d.token) for d, ref in zip(deliveries, refs, strict=True) if ref]
        try:
            outcomes = iter(self.repo.write_group((), requests).started if requests else ())
        except Unavailable as exc:  # the group did not land: no row of it started
            return [exc if ref else None for ref in refs]
        begun: list[Attempt | None | Unavailable] = []
        for delivery, ref in zip(deliveries, refs, strict=True):
            try:
                begun.append(self._begun(delivery, ref, next(outcomes), opened) if ref else None)
            except Unavailable as exc:
                begun.append(exc)
        return begun

    def _ref(self, delivery: Delivery) -> TaskRef | None:
        try:
            return parse_payload(delivery.raw, self.limits.max_payload_bytes)
        except BadPayload as exc:
            error = f"malformed payload: {exc}"
            task_id = named_task_id(delivery.raw) if isinstance(exc, BadLabel) else None
            if task_id is not None and self._unclaimable(task_id, error):
                self._dead_letter(delivery, Reason.malformed_payload, error, task_id)
            else:
                self._dead_letter(delivery, Reason.malformed_payload, error, None)
            return None

    def _unclaimable(self, task_id: int, error: str) -> bool:
        """A pending row whose payload names a lane or tenant no claim takes (a producer's raw push,
        or a row written with such a value): failed with the reason, fenced on its attempt, rather
        than run in another lane or pushed again for ever by the reconciler (issue 44)."""
        row = self.repo.get(task_id)
        if row is None or row.status is not TaskStatus.pending:
            return False
        return self.repo.cancel_pending(task_id, row.attempt, error)

    def _begun(self, delivery: Delivery, ref: TaskRef, started: StartOutcome, opened_ns: int) -> Attempt | None:
        """What a delivery's start found, settled: run it, or dead-letter it, or ack a duplicate."""
        task_id = ref.task_id
        if started.result is StartResult.busy and self._orphaned(started.task):
            started = self.repo.start_attempt(task_id, delivery.token)
        if started.result is StartResult.missing:
            self._dead_letter(delivery, Reason.unknown_task, f"unknown task: no row with task_id {task_id}", task_id)
            return None
        if started.result in (StartResult.terminal, StartResult.busy):
            # A duplicate delivery: the row is finished, or another live attempt holds it.
            self.queue.ack(delivery.token)
            status = started.task.status.value if started.task else "?"
            self.events.emit(ev.DUPLICATE, task_id=task_id, status=status, worker=self.worker_id)
            return None
        task = started.task
        assert task is not None
        attempt = Attempt(delivery=delivery, task=task, started_ms=self.clock.now_ms())
        attempt.span = self._attempt_span(attempt, ref.traceparent or task.traceparent, opened_ns)
        # The token pairs this line with the claim's (debug) line: claim-to-start in the logs.
        self.events.emit(
            ev.STARTED, task_id=task.task_id, attempt=task.attempt, token=delivery.token, worker=self.worker_id
        )
        if delivery.cancelled:  # the claim found the operator's cancel mark (it was reclaimed, handed back)
            self.finish(attempt, Outcome.cancelled())
            return None
        return attempt

    def _attempt_span(self, attempt: Attempt, parent: str | None, opened_ns: int) -> Span:
        """The attempt's span in the task's trace (from the payload, else the row), from the claim's
        processing on; its first child covers the claim and the start on the row."""
        span = self.tracer.start("docllm.attempt", parent=parent, start_ns=opened_ns)
        if span.recording:
            span.set(
                {
                    "docllm.task_id": attempt.task_id,
                    "docllm.attempt": attempt.number,
                    "docllm.worker": self.worker_id,
                    "docllm.lease_token": attempt.token,
                }
            )
            self.tracer.start("docllm.claim", parent=span.traceparent, start_ns=opened_ns).end()
        return span

    def _ended(self, attempt: Attempt, outcome: Outcome, landed: bool) -> None:
        """The attempt's verdict and its Reason on its span, which ends here."""
        span = attempt.span
        if span.recording:
            verdict = {"docllm.verdict": outcome.kind.value, "docllm.landed": landed}
            if outcome.reason is not None:
                verdict["docllm.reason"] = str(outcome.reason)
            span.set(verdict)
        span.end()

    def _orphaned(self, row: Task | None) -> bool:
        """A row ``processing`` under an attempt whose lease no longer exists (its claimer stalled
        past the lease before starting, or its start's answer was lost and the payload requeued):
        nothing in Redis would ever settle it (I1), so hand it back uncharged, fenced on that
        attempt. True when this delivery may start now."""
        if row is None or row.lease_token is None or self.queue.lease_exists(row.lease_token):
            return False
        if self.repo.hand_back(row.task_id, row.attempt, ORPHANED_REASON):
            self.events.emit(
                ev.RELEASED,
                task_id=row.task_id,
                attempt=row.attempt,
                reason=Reason.orphaned,
                error=ORPHANED_REASON,
                worker=self.worker_id,
            )
        return True

    # -- while it runs -----------------------------------------------------------------------
    def heartbeat(self, attempt: Attempt) -> bool:
        """Renew the lease; False means it is lost and the attempt must commit nothing."""
        renewed = self.heartbeat_many([attempt])[0]
        if not renewed:
            self.lease_lost(attempt)
        return renewed

    def heartbeat_many(self, attempts: list[Attempt]) -> list[bool]:
        """Renew every lease in one round trip; False for each one that is lost (or that its own
        commit acked meanwhile: the caller, which knows, reports a loss with ``lease_lost``)."""
        renewed = self.queue.extend_many([a.token for a in attempts], self.lease.lease_ms) if attempts else []
        for attempt, ok in zip(attempts, renewed, strict=True):
            if ok:
                self.events.emit(ev.LEASE_RENEWED, task_id=attempt.task_id, attempt=attempt.number)
        return renewed

    def lease_lost(self, attempt: Attempt) -> None:
        attempt.span.event("docllm.lease_lost", {"docllm.lease_token": attempt.token})
        self.events.emit(
            ev.LEASE_LOST, task_id=attempt.task_id, attempt=attempt.number, token=attempt.token, worker=self.worker_id
        )

    def cancelled(self, attempts: list[Attempt]) -> set[int]:
        """The task ids among these attempts that an operator cancelled (one round trip)."""
        return self.queue.cancel_marks([a.task_id for a in attempts]) if attempts else set()

    def hand_back(self, attempt: Attempt) -> bool:
        """Lease loss (DESIGN section 5): the row goes back to pending without charging an attempt,
        fenced, and the payload back to ready when that lands. When it does not land, someone else
        already settled the row (the reaper reclaimed it, or a newer attempt holds it)."""
        ending = self.ending(attempt, Happened.lease_lost)
        with traced("docllm.finish", parent=attempt.span):
            error, usage = ending.error or "", attempt.usage
            landed = self._unsure(attempt, self.repo.hand_back, attempt.task_id, attempt.number, error, usage)
        self._ended(attempt, ending, landed)
        self._settle([(attempt, landed)])
        if not landed:
            return False
        if not self.queue.requeue(attempt.token, front=True):  # the lease is gone (not just lapsed)
            self.queue.push(attempt.delivery.raw, front=True)
        self.events.emit(
            ev.RELEASED,
            task_id=attempt.task_id,
            attempt=attempt.number,
            reason=ending.reason,
            error=ending.error,
            worker=self.worker_id,
        )
        return True

    def facts(self, attempt: Attempt, happened: Happened, error: str = "", retry_after: float | None = None) -> Facts:
        """What happened to ``attempt``, with the task's and the policies' numbers ``decide`` needs."""
        return Facts(
            happened,
            error=error,
            retry_after=retry_after,
            handbacks=attempt.task.handbacks,
            max_handbacks=self.retry.max_handbacks,
            limit_seconds=self.lease.max_runtime_seconds,
        )

    def ending(self, attempt: Attempt, happened: Happened) -> Outcome:
        """The verdict of an attempt that ends for a reason of the runtime's (shutdown, timeout...)."""
        return decide(self.facts(attempt, happened))

    def reserve(self, attempt: Attempt) -> Facts | None:
        """The spend ledger's reservation of the attempt's document, before its review sends
        anything (blocking: a Redis call; I16). None: the review may go on (``attempt.hold`` is the
        key held, if any); else what stopped it, for ``decide``: over the per-task cap (failed),
        a daily cap reached (handed back uncharged), Redis down (handed back). A document the
        review would refuse anyway (empty, too big) is left to ``observe``."""
        document = attempt.task.document
        if self.ledger is None or not self.ledger.reserves or document is None or not document.strip():
            return None
        if len(document.encode("utf-8")) > self.limits.max_document_bytes:
            return None
        try:
            rubric = self._rubric(attempt.task)
            name = attempt.task.task_name or ""
            held = self.ledger.reserve_attempt(attempt.task_id, attempt.number, name, document, rubric)
            attempt.hold, attempt.hold_at = held if held is not None else (None, None)
        except Exception as exc:  # noqa: BLE001 - as observe: decide() says who pays
            seen = facts_of(exc)
            return self.facts(attempt, seen.happened, seen.error, seen.retry_after)
        return None

    async def observe(self, attempt: Attempt) -> Outcome | Facts:
        """Run the reviewer: a success (the report to commit), or what went wrong, for ``decide``
        (after the LLM gate judged it, when ``JUDGED``). Cancellation propagates, and stops the
        LLM call in flight (I11). The LLM calls add up on ``attempt.meter``, written with whatever
        outcome ``finish`` writes."""
        document = attempt.task.document
        if document is None or not document.strip():
            return self.facts(attempt, Happened.invalid_document, "document is empty: nothing to review")
        size = len(document.encode("utf-8"))
        if size > self.limits.max_document_bytes:
            error = f"document of {size} bytes is over the limit of {self.limits.max_document_bytes}"
            return self.facts(attempt, Happened.invalid_document, error)
        try:
            rubric = self._rubric(attempt.task)
            purse = Purse(self.ledger, attempt) if self.ledger is not None else None
            with metering(attempt.meter), within(attempt.span), spending(purse):
                report = await review_with(self.reviewer, attempt.task.task_name or "", document, rubric)
        except Exception as exc:  # noqa: BLE001 - a reviewer bug must not kill the worker: decide() says who pays
            seen = facts_of(exc)
            return self.facts(attempt, seen.happened, seen.error, seen.retry_after)
        if rubric is not None:  # which rubric, at which version, this report followed
            report = {**report, "rubric": rubric.ref, "rubric_version": rubric.version}
        return Outcome.success(report)

    def rubric(self, task: Task) -> Rubric | None:
        """The task's rubric as an attempt reviews it (the batch lane builds its lines with it)."""
        return self._rubric(task)

    def _rubric(self, task: Task) -> Rubric | None:
        """The task's rubric, read now (an edited file counts from the next attempt); one that is
        gone or broken is a RubricError, which fails the task with the file and line to fix. On the
        event loop: the catalog stats a small local file and parses it only when it changed."""
        if task.rubric is None:
            return None
        if self.rubrics is None:
            raise RubricError(f"rubric {task.rubric!r}: this worker has no rubrics configured")
        return self.rubrics.get(task.rubric)

    async def review(self, attempt: Attempt) -> Outcome:
        """``reserve``, ``observe`` and ``decide``, with no LLM gate to judge a provider failure (tests, tools)."""
        seen = self.reserve(attempt) or await self.observe(attempt)
        return seen if isinstance(seen, Outcome) else decide(seen)

    # -- finish ------------------------------------------------------------------------------
    def finish(self, attempt: Attempt, outcome: Outcome) -> bool:
        """Write the outcome to the row (fenced), then settle the lease. False if the attempt was stale.

        Safe to call again after an ``Unavailable``: a write that already landed is recognised from
        the row, and the queue step after it is token-checked (the attempt's span ends once it lands)."""
        if outcome.kind is OutcomeKind.success:
            return self.commit_many([(attempt, outcome)])[0]
        with traced("docllm.finish", parent=attempt.span):
            landed = self._unsure(attempt, self._finish, attempt, outcome)
        self._ended(attempt, outcome, landed)
        self._settle([(attempt, landed)])
        return landed

    def commit_many(self, ends: Sequence[tuple[Attempt, Outcome]]) -> list[bool]:
        """``finish`` for attempts that each end with a report: their commits in one store group,
        then the leases of those that landed in one queue call (each as if alone). Per attempt,
        False if it was stale. Safe to call again after an ``Unavailable``, as ``finish`` is."""
        spans = [a.span.child("docllm.finish") if a.span.recording else a.span for a, _ in ends]
        writes = [
            FencedWrite(WriteKind.commit, a.task_id, a.number, result=storable_report(o.report or {}), usage=a.usage)
            for a, o in ends
        ]
        try:
            landed, refused = self._commit_group(ends, writes)
        except BaseException as exc:
            if not isinstance(exc, Unstorable):  # a refused group sent nothing, or rolled back: it did not land
                for a, _ in ends:  # its writes may have landed: a retried finish reads its row (``_wrote``)
                    a.meta["unsure"] = True
            _end_spans(ends, spans, exc)
            raise
        if refused is not None:  # nothing was written: the attempt fails with the reason
            _end_spans(ends, spans, refused)
            return [self._unstorable(ends[0][0], refused)]
        for (a, o), ok, span in zip(ends, landed, spans, strict=True):
            if ok:
                self.events.emit(ev.SUCCEEDED, task_id=a.task_id, attempt=a.number, worker=self.worker_id)
            else:
                self._stale(a)
            if span is not a.span:
                span.end()
            self._ended(a, o, ok)
        self._settle(list(zip([a for a, _ in ends], landed, strict=True)))
        return landed

    def _commit_group(
        self, ends: Sequence[tuple[Attempt, Outcome]], writes: list[FencedWrite]
    ) -> tuple[list[bool], Unstorable | None]:
        """The group's commits, then the acks of those that landed; or, for a group of one, the
        store's refusal of what its report holds (a bigger group's goes up: the grouper halves it,
        ``grouper.send_bisected``; any other error of the store is no one report's)."""
        try:
            written = self.repo.write_group(writes).written
        except Unstorable as exc:
            if len(ends) > 1:
                raise
            return [], exc
        landed = [self._wrote(a, TaskStatus.success, w) for (a, _), w in zip(ends, written, strict=True)]
        self.queue.ack_many([a.token for (a, _), ok in zip(ends, landed, strict=True) if ok])
        return landed, None

    def _unstorable(self, attempt: Attempt, exc: Unstorable) -> bool:
        """A report the store refuses on its own, for what it holds (``Unstorable``: not an outage,
        nor any other error of the store's): the attempt fails with the reason, a person can read
        it, and nothing else is charged (issue 44)."""
        return self.finish(attempt, Outcome.permanent(f"the report cannot be stored: {exc}", Reason.unstorable_report))

    def _finish(self, attempt: Attempt, outcome: Outcome) -> bool:
        task, n, usage = attempt.task, attempt.number, attempt.usage
        fields = dict(task_id=task.task_id, attempt=n, worker=self.worker_id)
        if outcome.kind is OutcomeKind.cancelled:
            return self._cancelled(attempt)
        if outcome.kind is OutcomeKind.release:
            return self._released(attempt, outcome)
        error, reason = outcome.error or "unknown error", outcome.reason or Reason.other
        if outcome.kind is OutcomeKind.retryable and not task.last_attempt(self.retry.max_attempts):
            retried = self.repo.retry(task.task_id, n, error, usage=usage)
            if not self._wrote(attempt, TaskStatus.pending, retried, error):
                return self._stale(attempt)
            delay = self.retry.delay_seconds(task.retry_count + 1, outcome.retry_after)
            self.queue.retry_later(attempt.token, int(delay * 1000))
            self.events.emit(ev.RETRIED, reason=reason, error=error, delay_s=round(delay, 3), **fields)
            return True
        if outcome.kind is OutcomeKind.retryable:
            budget = task.budget(self.retry.max_attempts)
            error = f"attempts exhausted ({task.retry_count + 1}/{budget}): {error}"
            reason = Reason.attempts_exhausted
        if not self._wrote(attempt, TaskStatus.failed, self.repo.fail(task.task_id, n, error, usage=usage), error):
            return self._stale(attempt)
        # I5: a failed task's payload is in the dead-letter list, even when Redis lost the lease
        # (then no reaper will ever see it): record it without the token, unless a reaper that
        # found the lease expired after the row write has already recorded it from the row.
        if not self.queue.dead_letter(attempt.token, attempt.delivery.raw, error, task.task_id):
            self.queue.dead_letter(None, attempt.delivery.raw, error, task.task_id, unless_lettered=True)
        self.events.emit(ev.FAILED, reason=reason, error=error, **fields)
        return True

    def _released(self, attempt: Attempt, outcome: Outcome) -> bool:
        """A hand-back (``decide``'s third verdict): the row back to pending uncharged, fenced, then
        the payload to ready at once, or after a backoff when the LLM boundary was to blame (a
        provider that just failed is not asked again in the same breath)."""
        error, reason = outcome.error or "released", outcome.reason or Reason.other
        released = self.repo.hand_back(attempt.task_id, attempt.number, error, attempt.usage, outcome.counted)
        if not self._wrote(attempt, TaskStatus.pending, released, error):
            return self._stale(attempt)
        delay = 0.0
        if outcome.counted or outcome.retry_after is not None:
            delay = self.retry.delay_seconds(attempt.task.handbacks + 1, outcome.retry_after)
            self.queue.retry_later(attempt.token, int(delay * 1000))
        else:
            self.queue.requeue(attempt.token, front=True)
        self.events.emit(
            ev.RELEASED,
            task_id=attempt.task_id,
            attempt=attempt.number,
            reason=reason,
            error=error,
            delay_s=round(delay, 3),
            worker=self.worker_id,
        )
        return True

    def _cancelled(self, attempt: Attempt) -> bool:
        """The operator's cancel: the row fails (fenced, so a stale attempt cannot) with the cancel
        as its error; the payload is acked, not dead-lettered (a cancel is no failure to retry in
        bulk; ``docllm dead retry TASK_ID`` still reopens it), and the mark has done its work."""
        task_id, n = attempt.task_id, attempt.number
        failed = self.repo.fail(task_id, n, CANCELLED_ERROR, usage=attempt.usage)  # what the provider billed
        if not self._wrote(attempt, TaskStatus.failed, failed, CANCELLED_ERROR):
            return self._stale(attempt)
        self.queue.ack(attempt.token)
        self.queue.clear_cancelled([task_id])
        self.events.emit(ev.CANCELLED, task_id=task_id, attempt=n, worker=self.worker_id)
        return True

    def _unsure(self, attempt: Attempt, write: Callable[..., bool], *args: Any) -> bool:
        """``write(*args)``, noting on the attempt that a write that did not answer (or whose
        next step failed) may have landed: a retried finish then reads the row (``_wrote``)."""
        try:
            return write(*args)
        except BaseException:
            attempt.meta["unsure"] = True
            raise

    def _settle(self, ends: Sequence[tuple[Attempt, bool]]) -> None:
        """The spend ledger's settlement of these ends (I16): what each attempt's calls cost is
        counted when its write landed, and its hold released (or drawn on, for a batch member)."""
        if self.ledger is None:
            return
        items = []
        for a, landed in ends:
            spent = shares(a.meter.cost_by_deployment, a.usage.cost_usd) if landed else {}
            if (a.hold is not None and a.hold_release) or spent:
                items.append(Settle(a.hold, a.hold_release, spent))
            items += [Settle(key, True, {}) for key in a.chunk_holds]
            a.chunk_holds = []
            if landed or a.hold_release:
                a.hold = None  # settled once, whatever ``finish`` is called again for
        if items:
            self.ledger.settle(items)

    def _wrote(self, attempt: Attempt, status: TaskStatus, wrote: bool, error: str | None = None) -> bool:
        """Whether *this* write landed: it did now, or an earlier try of it whose answer never came
        did (a retried ``finish``; the attempt says so: ``_unsure``). A refused write is not read as
        landed otherwise: another writer on the same attempt (a second poller of one batch) may
        have written the same status, and counting its write as ours counts its spend twice (I16).
        The same attempt number is not proof enough even then: a reaper (or the reconciler) may
        have failed or retried the row for this attempt, with its own reason; only a row that also
        carries this write's ``error`` was written by it."""
        if wrote:
            return True
        if not attempt.meta.get("unsure"):
            return False
        row = self.repo.get(attempt.task_id)
        return (
            row is not None
            and row.attempt == attempt.number
            and row.status is status
            and (error is None or row.error == error)
        )

    def _stale(self, attempt: Attempt) -> bool:
        # Another attempt (or the reaper) moved the row on. The lease, if it still exists, is
        # left to expire: the reaper then settles it from the row, which is always safe.
        row = self.repo.get(attempt.task_id)
        if row is None:
            self._dead_letter(attempt.delivery, Reason.row_deleted, "task row deleted while in flight", attempt.task_id)
        status = row.status.value if row else "deleted"
        self.events.emit(
            ev.STALE, task_id=attempt.task_id, attempt=attempt.number, row_status=status, worker=self.worker_id
        )
        return False

    def _dead_letter(self, delivery: Delivery, reason: Reason, error: str, task_id: int | None) -> None:
        self.queue.dead_letter(delivery.token, delivery.raw, error, task_id)
        self.events.emit(ev.DEAD_LETTERED, reason=reason, error=error, task_id=task_id, worker=self.worker_id)


def _end_spans(ends: Sequence[tuple[Attempt, Outcome]], spans: Sequence[Span], exc: BaseException) -> None:
    """The ``docllm.finish`` child spans of a group that did not land, ended with its error."""
    for (a, _), span in zip(ends, spans, strict=True):
        if span is not a.span:
            span.end(exc)
