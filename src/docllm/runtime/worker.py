"""The worker: one dispatcher claims only as many tasks as there are free slots, each attempt is a
coroutine, and one heartbeat timer renews every lease of the process in one round trip.

A slot is freed when the attempt's review ends, not when its end is written: when a burst of
answers arrives, the next requests go while the burst's ends are written (issue 24). At most
``concurrency`` ends are written at once, so at most twice ``concurrency`` attempts are claimed.
An end even waits (briefly, its lease renewed) while the freed slots are refilled: the next
requests' claims and starts take the process's CPU before the burst's commits do. The reports of
attempts that end together are committed as groups formed on the loop (``loop_grouper``): one
port call a group, not a thread hop and a waiting port thread each.

An attempt is abandoned (its review task cancelled, so the LLM request in flight stops and no
further chunk is sent, I11) when its lease is lost (it commits nothing and hands the row back),
when it overruns PROCESSING_TIMEOUT_SECONDS (I8: a failed attempt), when an operator cancelled
its task (seen at a heartbeat: the row fails "cancelled by operator"), and at the end of the
shutdown grace period (released to ready uncharged, D11). Whose fault a failure is, and so what
the attempt writes, is ``domain.tasks.verdict.decide``'s; the LLM gate gathers what it needs to know.
The same code runs in production and, on virtual time, in the simulation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from docllm.domain import events as ev
from docllm.domain.backoff import Backoff, jittered
from docllm.domain.errors import Unavailable
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, Delivery
from docllm.domain.tasks.outcome import Outcome, OutcomeKind, Reason
from docllm.domain.tasks.verdict import JUDGED, Facts, Happened, decide
from docllm.runtime.budget_gate import BudgetGate
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.loop_grouper import LoopGrouper
from docllm.runtime.outage import Outage
from docllm.runtime.port_calls import PortCalls
from docllm.runtime.running import Running
from docllm.runtime.waiting import sleep_unless

# After a failed heartbeat the next one comes this soon (not a whole heartbeat interval later).
HEARTBEAT_RETRY_SECONDS = 1.0
# After the shutdown grace, releases are written for at most this long (or half a lease, if
# shorter): they only save the wait for a lease's expiry, and a stop must end in bounded time even
# when Redis or the database does not answer. Half a lease, not a whole one, so that the stop
# stays well inside grace + lease (what an orchestrator's stop timeout is set from).
RELEASE_SECONDS = 5.0
# An ended review's end waits while freed slots are being refilled (the next requests go first,
# issue 24), at most this long (or a tenth of a lease, if shorter): its lease is renewed meanwhile.
END_HOLD_SECONDS = 2.0

log = logging.getLogger("docllm.worker")
# A claimed batch's starts, per delivery (``TaskProcessor.begin_batch``); None: the stop came first.
Begun = list[Attempt | None | Unavailable] | None

# Failures of a review the provider answered (an invalid report, a permanent error): it serves.
SERVED = frozenset({Happened.invalid_answer, Happened.permanent})


class Worker:
    def __init__(
        self,
        proc: TaskProcessor,
        calls: PortCalls,
        gate: LlmGate,
        concurrency: int,
        idle_wait_seconds: float = 1.0,
        logger: logging.Logger = log,
        budget: BudgetGate | None = None,
        linger_s: float = 0.005,
    ):
        self.proc, self.calls, self.gate, self.log = proc, calls, gate, logger
        self.budget = budget  # the fleet's spend cap (I14); None: no cap to keep
        self.concurrency, self.idle_wait = concurrency, idle_wait_seconds
        self.lease = proc.lease
        self.claimed: dict[str, asyncio.Task[None]] = {}  # token -> its attempt, from claim until settled
        self.running: dict[str, Running] = {}  # token -> attempt started on the row
        self.writing: set[str] = set()  # tokens whose review ended and whose end is being written
        self.starting = 0  # claimed batches whose starts are being written
        self.queue_dry = False  # the last claim found fewer tasks than free slots
        self.paused = False  # the dispatcher waits (the breaker, the spend cap, the database)
        self._refilled = asyncio.Event()  # set when ends may be written (``refilling`` is over)
        self.commits = LoopGrouper(calls, proc.commit_many, linger_s)  # the ends with a report, grouped on the loop
        self.outage = Outage("redis/database", logger, draw=proc.retry.rng.random)  # jittered
        self.stop_requested = asyncio.Event()
        self.releasing = False  # the shutdown grace is over: whatever runs goes back to ready
        self.resume_at = 0.0  # event-loop time before which nothing is claimed (the database is down)
        self.last_beat: float | None = None
        self.drain_deadline: float | None = None  # event-loop time the shutdown grace ends
        self.exit_deadline: float | None = None  # event-loop time run() returns by, whatever hangs
        self._slot_freed = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self.claimed)

    @property
    def free_slots(self) -> int:
        """Attempts that may be claimed now: ``concurrency`` reviews, and as many ends being written."""
        reviewing = len(self.claimed) - len(self.writing)
        return min(self.concurrency - reviewing, 2 * self.concurrency - len(self.claimed))

    @property
    def end_hold_seconds(self) -> float:
        return min(self.lease.lease_seconds / 10, END_HOLD_SECONDS)

    @property
    def refilling(self) -> bool:
        """Freed slots are being filled with work the queue has: the next requests' claims and
        starts go before the ended reviews' ends, which would hold the process's one CPU first."""
        if self.stop_requested.is_set():
            return False
        return self.starting > 0 or (self.free_slots > 0 and not self.queue_dry and not self.paused)

    def _refill_seen(self) -> None:
        if not self.refilling:
            self._refilled.set()

    @property
    def release_seconds(self) -> float:
        return min(self.lease.lease_seconds / 2, RELEASE_SECONDS)

    def stop(self, grace_seconds: float) -> None:
        """Stop claiming; attempts still running after ``grace_seconds`` go back to ready, and
        ``run`` returns at most ``release_seconds`` later (a release not written by then is left
        to the lease's expiry)."""
        if not self.stop_requested.is_set():
            self.drain_deadline = asyncio.get_running_loop().time() + grace_seconds
            self.exit_deadline = self.drain_deadline + self.release_seconds
            self.stop_requested.set()
            self._slot_freed.set()
            self._refilled.set()

    async def run(self) -> None:
        """Claim and run attempts until ``stop``, then drain (D11)."""
        beats = asyncio.create_task(self._heartbeats(), name="heartbeats")
        dispatcher = asyncio.create_task(self._dispatch(), name="dispatcher")
        stopped = asyncio.create_task(self.stop_requested.wait(), name="stop-requested")
        try:
            await asyncio.wait([stopped, dispatcher], return_when=asyncio.FIRST_COMPLETED)
            if not self.stop_requested.is_set():
                dispatcher.result()  # the dispatcher died: raise what killed it
            await self._drain()
            # The dispatcher ends within one blocking wait; what it took meanwhile goes back to ready.
            await asyncio.wait([dispatcher], timeout=self._left())
            await _until_done(self.claimed, self._left())
            if self.claimed:
                self.log.warning(
                    "stopping with %d attempts not released (Redis or the database does not answer); "
                    "their leases expire and the reaper settles them",
                    len(self.claimed),
                )
        finally:
            for task in (beats, dispatcher, stopped, *self.claimed.values()):
                task.cancel()

    def _left(self) -> float:
        """Seconds until ``exit_deadline``."""
        assert self.exit_deadline is not None
        return max(0.0, self.exit_deadline - asyncio.get_running_loop().time())

    # -- claiming ----------------------------------------------------------------------------
    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stop_requested.is_set():
            self.last_beat = loop.time()
            pause = await self.gate.pause()  # the LLM breaker is open, or this process's LLM fails
            if pause <= 0 and self.budget is not None:
                pause = await self.budget.pause()  # the fleet's spend cap is reached (I14)
            if pause <= 0 and self.resume_at > loop.time():
                pause = self.resume_at - loop.time()  # the database is down
            if pause > 0:
                await self._pause(pause)
                continue
            free = self.free_slots
            if free <= 0:
                self._slot_freed.clear()
                self._refill_seen()
                await self._slot_freed.wait()
                continue
            try:
                found = await self.calls.claim(self.proc.claim_batch, free)
                self.queue_dry = len(found) < free
                self._refill_seen()
                if not found:
                    found = await self.calls.wait_claim(self.proc, self.idle_wait)
                self.outage.ok()
            except Unavailable as exc:
                await self._pause(self.outage.failed(exc))
                continue
            except Exception:  # a bug must not stop the process claiming for good
                self.log.exception("unexpected error while claiming; next try in 1 s")
                await self._pause(1.0)
                continue
            if found:
                self.starting += 1  # now, not when the coroutine first runs: the ends keep waiting
                begun = asyncio.ensure_future(self._begin_batch(found))
                for i, delivery in enumerate(found):
                    self._start(delivery, begun, i)

    async def _pause(self, seconds: float) -> None:
        """The dispatcher waits: no slot is refilled meanwhile, so no end waits for that."""
        self.paused = True
        self._refill_seen()
        try:
            await sleep_unless(self.stop_requested, seconds)
        finally:
            self.paused = False

    async def _begin_batch(self, found: list[Delivery]) -> Begun:
        """The claimed batch's starts, one group in the store (``TaskProcessor.begin_batch``);
        None when the stop came first (each delivery is handed back untouched)."""
        try:
            if self.stop_requested.is_set():
                return None
            try:
                return await self.calls.claim(self.proc.begin_batch, found)
            except Unavailable as exc:  # before any row started (a malformed payload's dead letter)
                return [exc] * len(found)
        finally:
            self.starting -= 1
            self._refill_seen()

    def _start(self, delivery: Delivery, begun: asyncio.Future[Begun], i: int) -> None:
        task = asyncio.create_task(self._attempt(delivery, begun, i), name=f"attempt-{delivery.token}")
        self.claimed[delivery.token] = task
        task.add_done_callback(lambda done: self._settled(delivery.token, done))

    def _settled(self, token: str, task: asyncio.Task[None]) -> None:
        self.claimed.pop(token, None)
        self.writing.discard(token)
        self._slot_freed.set()
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.log.error(
                "unexpected error in an attempt; its lease expires and the reaper settles it",
                exc_info=(type(exc), exc, exc.__traceback__) if exc else None,
            )

    # -- one attempt -------------------------------------------------------------------------
    async def _attempt(self, delivery: Delivery, begun: asyncio.Future[Begun], i: int) -> None:
        loop = asyncio.get_running_loop()
        batch = await asyncio.shield(begun)  # shared by the batch: one attempt's cancel must not end it
        if batch is None:  # claimed while the stop came: hand it back untouched
            await self._persist("release", self.calls.call, self.proc.queue.requeue, delivery.token, True)
            return
        attempt = batch[i]
        if isinstance(attempt, Unavailable):
            # The database is down: hand the payload back now rather than at lease expiry.
            self.resume_at = loop.time() + self.outage.failed(attempt)
            try:
                await self.calls.call(self.proc.queue.requeue, delivery.token, True)
            except Unavailable:
                pass  # the lease's expiry covers it
            return
        if attempt is None:
            return
        run = Running(attempt, started=loop.time())
        self.running[delivery.token] = run
        try:
            outcome = await self._review(run)  # its spend is settled with its write (the ledger, I16)
            run.settling = True
            self.writing.add(delivery.token)  # its slot is free: the next claim need not wait for the write
            self._slot_freed.set()
            await self._after_refill()
            if outcome is None:
                await self._persist("hand-back", self.calls.call, self.proc.hand_back, attempt)
            else:
                await self._persist("outcome", self._finish, attempt, outcome)
        finally:
            self.running.pop(delivery.token, None)

    async def _review(self, run: Running) -> Outcome | None:
        """The attempt's verdict (None: its lease is lost). The review runs under the runtime bound
        (waits on limits excluded); judging a failure (the gate's check) comes after it."""
        if self.releasing:
            return self.proc.ending(run.attempt, Happened.shutdown)
        loop = asyncio.get_running_loop()
        run.timer = loop.call_later(self.lease.max_runtime_seconds, self._overran, run)
        run.review = asyncio.create_task(self._observe(run.attempt), name=f"review-{run.attempt.token}")
        try:
            seen = await run.review
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the worker itself is being cancelled, not just this review
            return run.verdict
        finally:
            run.timer.cancel()
        if run.abandoned:
            return run.verdict
        if isinstance(seen, Outcome):  # a report to commit
            self.gate.served()
            return seen
        if seen.happened is Happened.over_spend_cap and self.budget is not None:
            self.budget.refused()  # claims wait: the cap is not freed by handing this one back
        if seen.happened in SERVED:
            self.gate.served()
        if seen.happened in JUDGED:
            seen = await self.gate.judge(seen)
        return run.verdict if run.abandoned else decide(seen)

    async def _observe(self, attempt: Attempt) -> Outcome | Facts:
        """The spend ledger's reservation (a port call), then the review (I16)."""
        ledger = getattr(self.proc, "ledger", None)
        if ledger is not None and ledger.reserves:
            refused = await self.calls.call(self.proc.reserve, attempt)
            if refused is not None:
                return refused
        return await self.proc.observe(attempt)

    def _overran(self, run: Running) -> None:
        """The runtime bound (I8), on the attempt's own running time: time its requests spent
        waiting on the fleet's limits or a provider's hold is not the document's (I12). An attempt
        that has waited longer than the bound itself is handed back (``waited_too_long``)."""
        loop = asyncio.get_running_loop()
        limit, now = self.lease.max_runtime_seconds, loop.time()
        waited = run.attempt.meter.waited(now)
        ran = now - run.started - waited
        if waited >= limit:
            self._abandon(run, self.proc.ending(run.attempt, Happened.waited_too_long))
        elif ran >= limit:
            self._abandon(run, self.proc.ending(run.attempt, Happened.timed_out))
        else:  # look again when either could first be reached
            run.timer = loop.call_later(max(0.01, min(limit - ran, limit - waited)), self._overran, run)

    async def _after_refill(self) -> None:
        """Wait while freed slots are refilled (``refilling``), ``end_hold_seconds`` at most."""
        if not self.refilling:  # nothing to wait for: no timer to arm on the hot path
            return
        until = asyncio.get_running_loop().time() + self.end_hold_seconds
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(until):  # no task per wait (``wait_for`` makes one)
                while self.refilling:
                    self._refilled.clear()
                    await self._refilled.wait()

    async def _finish(self, attempt: Attempt, outcome: Outcome) -> object:
        """Write the attempt's end: a report with the others that end with one (one port call, one
        store group); any other end on its own."""
        if outcome.kind is OutcomeKind.success:
            return await self.commits.submit((attempt, outcome))
        return await self.calls.call(self.proc.finish, attempt, outcome)

    async def _persist(self, what: str, write: Callable[..., Awaitable[object]], *args: object) -> None:
        """Write while Redis or the database is down, for about one lease, the waits jittered. Retrying
        is safe: the writes are fenced and token-checked. Past that the lease expires and the reaper
        settles it."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.lease.lease_seconds
        backoff = Backoff(0.2, 5.0)
        while True:
            limit = None
            if self.exit_deadline is not None:  # stopping: no longer than the stop allows, even
                give_up = min(give_up, self.exit_deadline)  # when a call hangs (its thread goes on)
                limit = max(0.0, give_up - loop.time())
            try:
                await asyncio.wait_for(write(*args), limit)
                return
            except TimeoutError:
                self.log.warning("could not record the %s in time; the reaper will settle it", what)
                return
            except Unavailable as exc:
                # Jittered: the attempts of one failed group (and of other workers) do not all try
                # again in the same instant and form the same group again (issue 44).
                delay = jittered(backoff.next(), 0.5, self.proc.retry.rng.random())
                if loop.time() + delay > give_up:
                    self.log.warning("could not record the %s (%s); the reaper will settle it", what, exc)
                    return
                await asyncio.sleep(delay)

    def _abandon(self, run: Running, verdict: Outcome | None) -> None:
        if run.decided:
            return
        a = run.attempt
        if verdict is None:
            self.proc.lease_lost(a)
        elif a.span.recording:  # a lease loss is its own event (``lease_lost``)
            a.span.event("docllm.abandoned", {"docllm.reason": str(verdict.reason)})
        self.proc.events.emit(
            ev.ABANDONED,
            task_id=a.task_id,
            attempt=a.number,
            token=a.token,
            reason=verdict.reason if verdict else Reason.lease_lost,
            error=verdict.error if verdict else "lease lost",
            worker=self.proc.worker_id,
        )
        run.abandon(verdict)

    # -- heartbeats --------------------------------------------------------------------------
    async def _heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        pause = self.lease.heartbeat_seconds
        while True:
            await asyncio.sleep(pause)
            pause = self.lease.heartbeat_seconds
            runs = [run for run in self.running.values() if not run.abandoned]
            if not runs:
                continue
            sent = loop.time()
            try:
                renewed = await self.calls.call(self.proc.heartbeat_many, [run.attempt for run in runs])
            except Unavailable as exc:  # keep going: the fenced commit decides
                self.log.warning("heartbeat of %d attempts failed: %s", len(runs), exc)
                # Soon again: the first renewal after a Redis failover must come at most a second
                # after it ends, or leases still valid may expire (settings.lease_for_failover).
                pause = min(HEARTBEAT_RETRY_SECONDS, self.lease.heartbeat_seconds)
                continue
            except Exception:  # a bug must not stop every renewal of the process
                self.log.exception("heartbeat of %d attempts failed unexpectedly", len(runs))
                continue
            for run, ok in zip(runs, renewed, strict=True):
                if ok:
                    run.renewed = sent
                elif self.running.get(run.attempt.token) is run:  # not one that ended meanwhile
                    self._abandon(run, None)
            await self._cancels([run for run in runs if not run.abandoned])

    async def _cancels(self, runs: list[Running]) -> None:
        """Stop the attempts an operator cancelled (``docllm cancel``): read at every heartbeat."""
        if not runs:
            return
        try:
            marked = await self.calls.call(self.proc.cancelled, [run.attempt for run in runs])
        except Unavailable as exc:  # the next heartbeat reads them again
            self.log.warning("reading cancel marks failed: %s", exc)
            return
        except Exception:  # a bug must not stop the heartbeats
            self.log.exception("reading cancel marks failed unexpectedly")
            return
        for run in runs:
            if run.attempt.task_id in marked and self.running.get(run.attempt.token) is run:
                self._abandon(run, self.proc.ending(run.attempt, Happened.cancelled))

    # -- shutdown (D11) ----------------------------------------------------------------------
    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.drain_deadline is not None
        await _until_done(self.claimed, self.drain_deadline - loop.time())
        self.releasing = True
        for run in list(self.running.values()):
            self._abandon(run, self.proc.ending(run.attempt, Happened.shutdown))
        # The releases are written by ``exit_deadline`` (``_persist``); wait for them.
        await _until_done(self.claimed, self._left())


async def _until_done(tasks: dict[str, asyncio.Task[None]], timeout: float) -> None:
    """Wait until every task in ``tasks`` (which shrinks as they end) is done, or ``timeout``."""
    if tasks and timeout > 0:
        await asyncio.wait(list(tasks.values()), timeout=timeout)
