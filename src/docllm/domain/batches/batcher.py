"""The batch lane's batcher (issue 28, docs/ARCHITECTURE.md, the batch lane): bulk tasks into
provider batches.

Each ``step`` claims bulk tasks (``LanePolicy.serves``: the realtime claim leaves them) and holds
their leases until it has ``max_tasks`` of them, or the first has waited ``max_wait_ms``. Then it
starts their attempts (the usual fenced start), builds one line per chunk, fails the tasks no
batch can review (an empty document, over the per-task cost cap at batch prices: as realtime),
records the batch and its members (``open``) BEFORE asking the provider anything, uploads
(``uploaded``) and creates (``submitted``). Whatever a crash or a provider failure leaves, a
poller finds in the durable record (``BatchPoller``'s adoption).

Blocking and synchronous, like the reaper: the runtime runs ``step`` in a port thread and
``keep`` (the leases it holds) beside it (runtime/batch_loops.py).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from docllm.domain import events as ev
from docllm.domain.batches.bound import leaving, return_all, to_realtime
from docllm.domain.batches.clock_steps import waited
from docllm.domain.batches.lines import request_lines
from docllm.domain.batches.members import BatchTarget
from docllm.domain.batches.model import BatchState
from docllm.domain.batches.ports import BatchApi, BatchLeases, BatchStore
from docllm.domain.errors import DocllmError, Unavailable
from docllm.domain.lanes.model import BATCH_LANE
from docllm.domain.llm.ledger import batch_key
from docllm.domain.llm.spend_ledger import REFUSED_RETRY_S, SpendLedger, refusal, room_of
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, Delivery
from docllm.domain.tasks.outcome import Outcome, Reason
from docllm.domain.tasks.verdict import Happened, decide, facts_of

Lines = tuple[list[dict[str, Any]], float | None]  # a member's batch lines and their estimate (USD)
REFUSED_PAUSE_MS = 60_000  # after the ledger refused a batch, claims wait for more room at most this long


class Batcher:
    def __init__(
        self,
        proc: TaskProcessor,
        store: BatchStore,
        leases: BatchLeases,
        api: BatchApi,
        target: BatchTarget,
        max_tasks: int,
        max_wait_ms: int,
        batch_lease_ms: int,
        ledger: SpendLedger | None = None,
        hold_ms: int = 25 * 3_600_000,
    ):
        self.proc, self.store, self.leases, self.api, self.target = proc, store, leases, api, target
        # The spend ledger (I16): a batch's estimate is reserved before its upload, held ``hold_ms``
        # at most (the batch's processing bound); at a cap, no batch claims.
        self.ledger, self.hold_ms = ledger, hold_ms
        # After the ledger refused a batch: (authority ms, day, cap, room under the cap) then.
        self.refused: tuple[int, int, int | None, int] | None = None
        self.max_tasks, self.max_wait_ms, self.batch_lease_ms = max_tasks, max_wait_ms, batch_lease_ms
        self.held: list[Delivery] = []  # claimed, not started: a crash leaves leases the reaper requeues uncharged
        self.first_ms: int | None = None  # authority time the oldest held delivery was claimed
        self._sending: list[Attempt] = []  # started, their batch not yet submitted
        self._batch_lease: tuple[str, str] | None = None  # (ref, token) while sending
        self._lock = threading.Lock()  # ``keep`` runs beside ``step``

    @property
    def worker_id(self) -> str:
        return self.proc.worker_id

    # -- the loop's two calls ------------------------------------------------------------------
    def step(self) -> bool:
        """Claim, and send a batch when one is full or has waited long enough. True: it sent a
        full one (more may be waiting). A batch whose upload failed is not sent: the loop waits its
        tick before the next (else a provider that is down is asked again at once, without end:
        its members are handed back uncharged to the front of the lane, a full batch again)."""
        room = self.max_tasks - len(self.held)
        if room > 0 and self._may_spend():
            found = self.proc.claim_batch(room, (BATCH_LANE,))
            now = self.proc.clock.now_ms()
            with self._lock:
                self.held.extend(found)
                if self.held and self.first_ms is None:
                    self.first_ms = now
        if not self.held or self.first_ms is None:
            return False
        full = len(self.held) >= self.max_tasks
        if not full and not waited(self.proc.clock.now_ms(), self.first_ms, self.max_wait_ms):
            return False
        with self._lock:
            deliveries, self.held, self.first_ms = self.held, [], None
        return self.send(deliveries) is not None and full

    def _may_spend(self) -> bool:
        """Whether the ledger has room for a batch: the day's spend and holds under the caps and,
        after a refused batch, more room than then (or another cap, another day, or
        ``REFUSED_PAUSE_MS`` later): the room there was did not fit it."""
        if self.ledger is None:
            return True
        view = self.ledger.view()
        if view is None:
            return True
        if self.target.price is None and view.cap_micro is not None:
            return False  # its spend could not be counted under the cap in force (`docllm budget set`)
        if self.refused is not None:
            at, day, cap, room = self.refused
            if (
                (view.day, view.cap_micro) == (day, cap)
                and room_of(view) <= room
                and not waited(self.proc.clock.now_ms(), at, REFUSED_PAUSE_MS)
            ):
                return False
            self.refused = None
        return view.claims

    def keep(self) -> None:
        """Renew the leases this batcher holds (its held claims, the members of the batch it sends,
        and that batch's lease): a full batch may wait ``max_wait_ms`` and an upload take long."""
        with self._lock:
            held, sending, batch = list(self.held), list(self._sending), self._batch_lease
        tokens = [d.token for d in held] + [a.token for a in sending]
        if tokens:
            renewed = self.proc.queue.extend_many(tokens, self.proc.lease.lease_ms)
            lost = {t for t, ok in zip(tokens, renewed, strict=True) if not ok}
            if lost:
                with self._lock:  # the reaper requeues a held one; a member's row is the poller's to settle
                    self.held = [d for d in self.held if d.token not in lost]
        if batch is not None:
            self.leases.renew(batch[0], batch[1], self.batch_lease_ms)

    def release(self) -> int:
        """At shutdown: the claims held for the next batch go back to the front of their lane
        (never started: nothing to charge); how many. One left out expires and the reaper requeues it."""
        with self._lock:
            held, self.held, self.first_ms = self.held, [], None
        return sum(1 for d in held if self.proc.queue.requeue(d.token, front=True))

    # -- a batch -------------------------------------------------------------------------------
    def send(self, deliveries: Sequence[Delivery]) -> str | None:
        """Start, record, upload, create. The batch's ref, or None when none was recorded or its
        upload failed (its members handed back)."""
        attempts: list[Attempt] = []
        for delivery, begun in zip(deliveries, self.proc.begin_batch(deliveries), strict=True):
            if isinstance(begun, Unavailable):  # its start did not land: the row is still pending
                self.proc.queue.requeue(delivery.token, front=True)
            elif begun is not None:
                attempts.append(begun)
        attempts, leaving_lane = leaving(self.proc, attempts)
        for a in leaving_lane:  # handed back by batches to the bound (issue 43): reviewed realtime
            try:
                to_realtime(self.proc, a)
            except Unavailable:  # not moved (Redis or the database): it goes by this batch after all
                attempts.append(a)
        with self._lock:
            self._sending = attempts
        try:
            lines = self._lines(attempts)
            if not lines:
                return None
            return self._submit([a for a in attempts if a.task_id in lines], lines)
        finally:
            with self._lock:
                self._sending, self._batch_lease = [], None

    def _lines(self, attempts: list[Attempt]) -> dict[int, Lines]:
        """Each attempt's lines and their estimate at batch prices; an attempt no batch can review
        (over the per-task cap among them: the ledger's one check) ends now, as realtime's would."""
        t = self.target
        found: dict[int, Lines] = {}
        for a in attempts:
            document = a.task.document or ""
            size = len(document.encode("utf-8"))
            if size > self.proc.limits.max_document_bytes:
                error = f"document of {size} bytes is over the limit of {self.proc.limits.max_document_bytes}"
                self.proc.finish(a, decide(self.proc.facts(a, Happened.invalid_document, error)))
                continue
            try:
                rubric = self.proc.rubric(a.task)
                lines = request_lines(
                    a.task_id, a.number, a.task.task_name or "", document, rubric, t.model, t.max_chunk_chars
                )
                usd = self.ledger.check_lines(t.priced, lines) if self.ledger is not None else None
            except Exception as exc:  # noqa: BLE001 - as realtime: decide() says who pays
                seen = facts_of(exc)
                self.proc.finish(a, decide(self.proc.facts(a, seen.happened, seen.error, seen.retry_after)))
                continue
            found[a.task_id] = (lines, usd)
        return found

    def _submit(self, attempts: list[Attempt], lines: dict[int, Lines]) -> str | None:
        ref, clock = uuid.uuid4().hex, self.proc.clock
        members = [(a.task_id, a.number) for a in attempts]
        # The chunking is recorded with the batch: the poller places its answers by the same split.
        self.store.open(ref, self.target.deployment, members, clock.now_ms(), self.target.max_chunk_chars)
        token = self._hold(ref)
        if token is None:  # a poller took it at once (it gives open batches a grace first): theirs now
            return ref
        self.proc.events.emit(ev.BATCH_OPENED, ref=ref, tasks=len(attempts), worker=self.worker_id)
        try:
            if not self._reserve(ref, attempts, lines):
                return None
            jsonl = "".join(json.dumps(line) + "\n" for a in attempts for line in lines[a.task_id][0]).encode()
            try:
                file_id = self.api.upload(jsonl, f"docllm-{ref}.jsonl")
            except DocllmError as exc:  # nothing at the provider refers to ``ref``: hand back at once
                # Counted (issue 43): an upload the provider keeps refusing (a key without the Files
                # API) would otherwise send the same tasks round for ever; at the bound they go realtime.
                return_all(self.proc, attempts, f"batch {ref}: its upload failed ({exc})")
                self._release(ref)  # nothing was sent: nothing will be billed
                self.store.advance(ref, BatchState.open, BatchState.returned, clock.now_ms(), error=str(exc))
                return None
            if not self.leases.renew(ref, token, self.batch_lease_ms):
                # Lapsed during a slow upload (a stalled host). Ours again unless a poller holds it;
                # one that held it and let go left the batch alone (within its grace) or moved it
                # on (returned, its members handed back), and then the advance below fails.
                token = self._hold(ref)
                if token is None:
                    return ref  # a poller adopted it: it creates the batch or hands the members back
            if not self.store.advance(ref, BatchState.open, BatchState.uploaded, clock.now_ms(), input_file_id=file_id):
                return ref
            try:
                made = self.api.create(file_id, ref)
            except DocllmError:  # maybe created (a lost answer): a poller finds it by ref, or creates it
                return ref
            recorded = self.store.advance(
                ref,
                BatchState.uploaded,
                BatchState.submitted,
                clock.now_ms(),
                batch_id=made.id,
                provider_status=made.status,
            )
            if not recorded:
                self._unrecorded(ref, made.id)
                return ref
            self.proc.events.emit(ev.BATCH_SUBMITTED, ref=ref, batch_id=made.id, worker=self.worker_id)
            return ref
        finally:
            if token is not None:
                self.leases.release(ref, token)

    def _unrecorded(self, ref: str, batch_id: str) -> None:
        """The record moved on without this create (a poller took the batch over while the create
        was in flight, its lease lost): cancel it at the provider, unless the record is this very
        batch (the poller found it by its docllm_ref). One billed batch per record (issue 43)."""
        now = self.store.get(ref)
        if now is not None and now.batch_id == batch_id:
            return
        why = f"the provider's batch {batch_id} was made after its record moved on: cancelled at the provider"
        try:
            self.api.cancel(batch_id)
        except DocllmError as exc:  # recorded as a batch of no member: the pollers cancel it, until they can
            orphan, at = uuid.uuid4().hex, self.proc.clock.now_ms()
            self.store.open(orphan, self.target.deployment, [], at, self.target.max_chunk_chars)
            self.store.advance(orphan, BatchState.open, BatchState.submitted, at, batch_id=batch_id)
            why = (
                f"the provider's batch {batch_id} was made after its record moved on; its cancel failed ({exc}): "
                f"recorded as {orphan} for the pollers to cancel"
            )
        self.proc.events.emit(ev.BATCH_CALL_FAILED, ref=ref, error=why, worker=self.worker_id)

    def _reserve(self, ref: str, attempts: list[Attempt], lines: dict[int, Lines]) -> bool:
        """The batch's estimate reserved (I16), after its record and before anything is sent: the
        record comes first, so a crash in between leaves an ``open`` batch a poller returns, and
        its return releases the hold. Refused at a cap: the members are handed back uncharged and
        uncounted, the batch is ``returned`` and no batch is claimed until there is more room."""
        if self.ledger is None:
            return True
        estimates = [lines[a.task_id][1] for a in attempts]
        usd = None if any(e is None for e in estimates) else sum(e or 0.0 for e in estimates)
        grant = self.ledger.reserve_batch(ref, self.target.priced, usd, self.hold_ms)
        if grant is None or grant.granted:
            return True
        why = refusal(grant, self.target.priced, usd)
        v = grant.view
        self.refused = (self.proc.clock.now_ms(), v.day, v.cap_micro, room_of(v))
        for a in attempts:
            self.proc.finish(a, Outcome.release(f"batch {ref}: {why}", Reason.spend_cap, retry_after=REFUSED_RETRY_S))
        self.store.advance(ref, BatchState.open, BatchState.returned, self.proc.clock.now_ms(), error=why)
        return False

    def _release(self, ref: str) -> None:
        if self.ledger is not None:
            self.ledger.release(batch_key(ref))

    def _hold(self, ref: str) -> str | None:
        """Take the batch's lease, and have ``keep`` renew it while this batcher sends; None: taken."""
        token = self.leases.acquire(ref, self.worker_id, self.batch_lease_ms)
        with self._lock:
            self._batch_lease = None if token is None else (ref, token)
        return token
