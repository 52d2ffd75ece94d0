"""The batch lane's poller (issue 28, I15): any process watches any unfinished batch, one at a time
per batch under its batch lease.

Each visit of a batch (``poll``), under its lease: renew the member tasks' leases (their batch is
their heartbeat); fail the members an operator cancelled; adopt a batch its batcher left ``open``
or ``uploaded`` (found at the provider by its docllm_ref, else created from its input file, else
its members handed back); ask the provider its status every ``poll_ms``; on ``completed`` read the
output and error files and end each member through the processor's one fenced finish (commit an
answered task, ``decide`` on a failed one, hand back a missing one), then ``applied``; on
``expired``, ``cancelled``, ``failed``, a lost file, or past the processing bound, hand every
member still on its attempt back uncharged, then ``returned``. Members are handed back before the
batch is marked ``returned``: a crash in between leaves a batch the next poller returns again,
never members whose leases nobody renews. Two pollers, or one file read twice, commit each task
once: every end is fenced on (task, attempt, processing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from docllm.domain import events as ev
from docllm.domain.batches.bound import return_all
from docllm.domain.batches.clock_steps import waited
from docllm.domain.batches.members import BatchTarget, hand_back_all, member_attempts
from docllm.domain.batches.model import COMPLETED, RUNNING, Batch, BatchState, ProviderBatch, ms_of
from docllm.domain.batches.ports import BatchApi, BatchLeases, BatchStore
from docllm.domain.batches.results import State, read_results
from docllm.domain.batches.verdict import task_facts
from docllm.domain.errors import BatchFileLost, DocllmError, TransientError
from docllm.domain.llm.ledger import batch_key
from docllm.domain.llm.spend_ledger import SpendLedger
from docllm.domain.review.chunking import Chunk, split_markdown
from docllm.domain.review.report import require_reviewable
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt
from docllm.domain.tasks.outcome import Outcome
from docllm.domain.tasks.ports import TaskViews
from docllm.domain.tasks.verdict import decide

ANY_CHUNKS = 1 << 30  # a member this visit does not apply: its lines are read only to be priced


class BatchPoller:
    def __init__(
        self,
        proc: TaskProcessor,
        store: BatchStore,
        leases: BatchLeases,
        api: BatchApi,
        target: BatchTarget,
        poll_ms: int,
        batch_lease_ms: int,
        bound_ms: int,
        adopt_grace_ms: int | None = None,
        ledger: SpendLedger | None = None,
        limit: int = 100,
        views: TaskViews | None = None,
        create_timeout_ms: int = 0,
        monotonic: Callable[[], float] | None = None,
    ):
        self.proc, self.store, self.leases, self.api, self.target = proc, store, leases, api, target
        self.poll_ms, self.batch_lease_ms, self.bound_ms = poll_ms, batch_lease_ms, bound_ms
        # An open or uploaded batch idle this long lost its batcher (which holds its lease meanwhile).
        self.adopt_grace_ms = batch_lease_ms if adopt_grace_ms is None else adopt_grace_ms
        # An uploaded batch is adopted only once its batcher's create has timed out too: a batcher
        # whose batch lease lapsed mid-create may still be making it (issue 43: two billed batches).
        self.create_timeout_ms = create_timeout_ms
        # This process's own clock (seconds): a batch's idle time is watched on it, so a step of the
        # authority clock neither cuts the wait short nor holds it for the step's length. None: the
        # record's time on the authority clock.
        self.monotonic = monotonic
        self._idle: dict[str, tuple[tuple[BatchState, Any], float]] = {}  # ref -> ((state, updated_at), first seen)
        self.ledger, self.limit = ledger, limit  # the spend ledger (I16): members settle on the batch's hold
        self.views = views  # the members' rows in one query per visit (without documents)
        self._asked: dict[str, int] = {}  # ref -> authority ms this process last asked the provider
        self._holding: dict[str, tuple[str, list[Attempt]]] = {}  # ref -> (lease token, live members)
        self._lock = threading.Lock()

    @property
    def worker_id(self) -> str:
        return self.proc.worker_id

    # -- the loop's two calls ------------------------------------------------------------------
    def step(self) -> bool:
        """Visit every unfinished batch (oldest first) whose lease is free."""
        unfinished = self.store.unfinished(self.limit)
        listed = {b.ref for b in unfinished}
        for ref in [ref for ref in self._idle if ref not in listed]:  # ended by another poller
            del self._idle[ref]
        for batch in unfinished:
            try:
                self.poll(batch.ref)
            except TransientError:
                raise  # Redis, the database or the provider: the loop backs off and comes again
            except DocllmError as exc:  # the provider refused something for this batch: next time
                self.proc.events.emit(ev.BATCH_CALL_FAILED, ref=batch.ref, error=str(exc), worker=self.worker_id)
        return False

    def keep(self) -> None:
        """Renew what a long visit holds (reading and applying a large batch): the batch leases
        and their members' leases."""
        with self._lock:
            holding = list(self._holding.items())
        for ref, (token, attempts) in holding:
            if self.leases.renew(ref, token, self.batch_lease_ms) and attempts:
                self.leases.renew_tasks([a.token for a in attempts], self.proc.lease.lease_ms)

    # -- one batch -----------------------------------------------------------------------------
    def poll(self, ref: str) -> None:
        token = self.leases.acquire(ref, self.worker_id, self.batch_lease_ms)
        if token is None:
            return  # another process polls it
        try:
            self._visit(ref, token)
        finally:
            with self._lock:
                self._holding.pop(ref, None)
            self.leases.release(ref, token)

    def _visit(self, ref: str, token: str) -> None:
        batch = self.store.get(ref)
        if batch is None or batch.state.terminal:
            self._asked.pop(ref, None)
            self._idle.pop(ref, None)
            return
        attempts = member_attempts(self.proc, batch.members, self.views)
        lapsed = 0  # members still on their attempt whose leases ran out (nobody polled in time)
        if attempts:  # a lease already lost is the reaper's (uncharged: its batch is unfinished)
            renewed = self.leases.renew_tasks([a.token for a in attempts], self.proc.lease.lease_ms)
            lapsed = renewed.count(False)
            attempts = [a for a, ok in zip(attempts, renewed, strict=True) if ok]
        with self._lock:
            self._holding[ref] = (token, attempts)
        cancelled = self.proc.cancelled(attempts)
        for a in [a for a in attempts if a.task_id in cancelled]:
            self.proc.finish(a, Outcome.cancelled())  # the row fails "cancelled by operator"
        attempts = [a for a in attempts if a.task_id not in cancelled]
        now = self.proc.clock.now_ms()
        if batch.age_ms(now) > self.bound_ms:
            self._return(batch, attempts, "the batch outlived its window and margin", cancel=True, counted=True)
        elif lapsed:
            # Wait for the reaper (within a reaper interval): it hands a lapsed member back uncharged
            # only while its batch is unfinished; ending the batch first would have it charged.
            return
        elif not attempts and batch.state is BatchState.submitted:
            self._return(batch, attempts, "no member is waiting for it any more", cancel=True)
        elif batch.state is not BatchState.submitted:
            self._adopt(batch, attempts, now)
        elif ref not in self._asked or waited(now, self._asked[ref], self.poll_ms):
            assert batch.batch_id is not None  # submitted: recorded with it
            self._asked[ref] = now
            seen = self.api.retrieve(batch.batch_id)
            if seen.status == COMPLETED:
                self._apply(batch, seen, attempts, token)
            elif seen.status not in RUNNING:  # failed, expired, cancelled (or a status we do not know)
                said = f" ({seen.error})" if seen.error else ""
                self._return(batch, attempts, f"the provider's batch {seen.id} ended {seen.status}{said}", counted=True)
            elif seen.status != batch.provider_status:
                self.store.advance(ref, BatchState.submitted, BatchState.submitted, now, provider_status=seen.status)

    def _adopt(self, batch: Batch, attempts: list[Attempt], now: int) -> None:
        """A batch left ``open`` or ``uploaded`` by a batcher that died (or failed to create it)."""
        grace = self.adopt_grace_ms + (self.create_timeout_ms if batch.state is BatchState.uploaded else 0)
        if not self._left_for(batch, now, grace):
            return  # its batcher may still be at it (uploaded: its create may be in flight until its timeout)
        self._idle.pop(batch.ref, None)
        found = self.api.find(batch.ref)
        if found is None and batch.state is BatchState.open:
            self._return(batch, attempts, "its batcher stopped before the upload")
            return
        if found is None:
            assert batch.input_file_id is not None  # uploaded: recorded with it
            found = self.api.create(batch.input_file_id, batch.ref)
        moved = self.store.advance(
            batch.ref,
            batch.state,
            BatchState.submitted,
            self.proc.clock.now_ms(),
            batch_id=found.id,
            input_file_id=found.input_file_id,
            provider_status=found.status,
        )
        if moved:
            self.proc.events.emit(ev.BATCH_ADOPTED, ref=batch.ref, batch_id=found.id, worker=self.worker_id)

    def _left_for(self, batch: Batch, now: int, grace_ms: int) -> bool:
        """Whether the batch has been left as it is for ``grace_ms``. On this process's own clock,
        from when it first saw the batch so: the batcher's create began before the record said
        ``uploaded``, so it has timed out once this poller has watched that long, whatever the
        authority clock did meanwhile (a step back would hold adoption for the step's length; one
        forward would adopt while the create may still make its batch: two billed)."""
        if self.monotonic is None:
            return waited(now, ms_of(batch.updated_at), grace_ms)
        mark, mono = (batch.state, batch.updated_at), self.monotonic()
        seen = self._idle.get(batch.ref)
        if seen is None or seen[0] != mark:
            self._idle[batch.ref] = seen = (mark, mono)
        return (mono - seen[1]) * 1000 >= grace_ms

    def _apply(self, batch: Batch, seen: ProviderBatch, attempts: list[Attempt], token: str) -> None:
        try:
            lines = [line for f in (seen.output_file_id, seen.error_file_id) if f for line in self.api.content(f)]
        except BatchFileLost as exc:
            self._return(batch, attempts, str(exc), counted=True)
            return
        t = self.target
        chunks = {a.task_id: self._chunks(a, batch) for a in attempts}
        # Every member's lines are read, so the batch's cost is what the provider charged for all of
        # them, whoever applies which member (a poller whose lease lapsed mid-apply left the rest to
        # another); only the members still on their attempt are applied, with their chunk counts.
        members = {m.task_id: (m.attempt, ANY_CHUNKS) for m in batch.members}
        members |= {a.task_id: (a.number, len(chunks[a.task_id])) for a in attempts}
        results = read_results(lines, members)
        usages = {task_id: r.usage(t.model, t.price) for task_id, r in results.tasks.items()}  # at the batch price
        for a in attempts:
            # Each finish under a lease still ours: a visit that outlived it (a stalled host) stops
            # here, and the poller that took the batch over applies the rest. The fences keep each
            # row committed once either way; this keeps its events and spend counted once too.
            if not self.leases.renew(batch.ref, token, self.batch_lease_ms):
                self.proc.events.emit(ev.BATCH_CALL_FAILED, ref=batch.ref, error="lease lost", worker=self.worker_id)
                return
            result = results.tasks[a.task_id]
            a.meter.total = usages[a.task_id]
            if a.usage.cost_usd:  # the deployment's daily spend counts its batches too
                a.meter.cost_by_deployment = {t.deployment: a.usage.cost_usd}
            # Counted when this member's write lands (its finish says so), drawn on the batch's hold.
            a.hold, a.hold_release = batch_key(batch.ref), False
            if result.state is State.answered:
                outcome = Outcome.success(self._stamped(a, result.report(chunks[a.task_id], t.model, t.deployment)))
            else:
                facts = task_facts(result, results.served, a.task.handbacks, self.proc.retry.max_handbacks, t.model)
                outcome = decide(facts)
            self.proc.finish(a, outcome)
        self.store.advance(
            batch.ref,
            BatchState.submitted,
            BatchState.applied,
            self.proc.clock.now_ms(),
            output_file_id=seen.output_file_id,
            error_file_id=seen.error_file_id,
            provider_status=seen.status,
            cost_usd=sum(u.cost_usd or 0.0 for u in usages.values()),
        )
        self._release(batch.ref)
        self.proc.events.emit(ev.BATCH_APPLIED, ref=batch.ref, tasks=len(attempts), worker=self.worker_id)

    def _chunks(self, attempt: Attempt, batch: Batch) -> list[Chunk]:
        """The task's document split as the batcher split it (read now: a visit's rows leave it out),
        by the chunking recorded with the batch: DOCLLM_LLM_MAX_CHUNK_CHARS may have changed since."""
        document = attempt.task.document
        if document is None:
            row = self.proc.repo.get(attempt.task_id)
            document = row.document if row is not None else None
        size = batch.max_chunk_chars or self.target.max_chunk_chars  # None: recorded before it was kept
        return split_markdown(require_reviewable(document or ""), size)

    def _stamped(self, attempt: Attempt, report: dict[str, Any]) -> dict[str, Any]:
        """Which rubric, at which version, the report followed (as realtime records it)."""
        try:
            rubric = self.proc.rubric(attempt.task)
        except DocllmError:
            return report
        return report if rubric is None else {**report, "rubric": rubric.ref, "rubric_version": rubric.version}

    def _release(self, ref: str) -> None:
        """The batch's hold goes (whatever its members did not draw); released twice is released once."""
        if self.ledger is not None:
            self.ledger.release(batch_key(ref))

    def _return(
        self, batch: Batch, attempts: list[Attempt], why: str, cancel: bool = False, counted: bool = False
    ) -> None:
        """Hand every member still on its attempt back uncharged, then mark the batch ``returned``.
        ``counted``: an end that returns the members without their answers (the provider failed or
        expired it, its files were lost, it outlived its window): counted, and bounded
        (``batch_bound``); else (its batcher stopped before the upload) uncounted."""
        if cancel and batch.batch_id is not None:
            self.api.cancel(batch.batch_id)
        if counted:
            handed = return_all(self.proc, attempts, f"batch {batch.ref}: {why}")
        else:
            handed = hand_back_all(self.proc, attempts, f"batch {batch.ref}: {why}; handed back uncharged")
        self._release(batch.ref)
        if self.store.advance(batch.ref, batch.state, BatchState.returned, self.proc.clock.now_ms(), error=why):
            self.proc.events.emit(ev.BATCH_RETURNED, ref=batch.ref, tasks=handed, error=why, worker=self.worker_id)
