"""The product's actors: the runtime's loops (``docllm.runtime``) as events, over the real
domain services built by the container.

A worker has several slots, each claiming and running one attempt at a time as
``WorkerPool._slot`` does: claim, begin, review (the simulated LLM answers later), heartbeat every
lease/3, abandon past PROCESSING_TIMEOUT_SECONDS, finish (retried while Redis or the database is
down, for about a lease), and on SIGTERM stop claiming, let attempts finish within the grace
period, then release the rest. Reapers and the reconciler run every interval as ``PeriodicLoop``
does, backing off while a service is down. Every port call goes through the actor's crash budget.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docllm.adapters.fault_injection import Crash, Faulty
from docllm.domain.errors import Unavailable
from docllm.domain.model import Attempt
from docllm.domain.services.outcome import Outcome
from docllm.domain.services.producer import retry_dead, submit
from docllm.runtime.outage import Outage
from sim.world import Actor

if TYPE_CHECKING:  # pragma: no cover
    from sim.product import ProductSystem

IDLE_POLL_MS = 60_000  # an idle slot is woken as soon as ready has an item; this is a safety net


@functools.cache
def quiet_logger() -> logging.Logger:
    """The runtime helpers log outages; in the simulation the trace says it instead."""
    logger = logging.getLogger("sim.runtime")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


@dataclass
class Run:
    attempt: Attempt
    outcome: Outcome
    last_renew: int  # true ms of the claim or of the last successful heartbeat


class ProductActor(Actor):
    def __init__(self, system: ProductSystem, name: str):
        super().__init__(system.world, name)
        self.sys = system
        self.armed: set[str] = set()

    def ports(self) -> tuple[Any, Any]:
        queue, repo = self.sys.ports_for(self)
        return Faulty(queue, self.budget, "queue"), Faulty(repo, self.budget, "repo")

    def point(self, name: str) -> None:
        """A named crash point: crash here if a fault armed it."""
        if name in self.armed:
            self.armed.discard(name)
            raise Crash(f"at {name}")

    def on_stop(self) -> None:
        self.armed.clear()


class Worker(ProductActor):
    kind = "worker"

    def __init__(self, system: ProductSystem, name: str, slots: int):
        super().__init__(system, name)
        self.slots = slots
        self.runs: dict[int, Run] = {}
        self.finishing: dict[int, Run] = {}  # the review is over, the outcome is being written
        self.stopping = False
        self.no_beat_until = 0

    def start(self) -> None:
        self.queue, repo = self.ports()
        self.proc = self.sys.processor(self.queue, repo, holder=self.label)
        self.runs, self.finishing, self.busy = {}, {}, set()
        self.stopping, self.drain_deadline = False, None
        self.outage = Outage("redis/database", quiet_logger())
        self.beat_ms = int(self.proc.lease.heartbeat_seconds * 1000)
        for slot in range(self.slots):
            self.after(self.sys.rng.uniform(0, 500), functools.partial(self._claim, slot))

    def on_stop(self) -> None:
        super().on_stop()
        for run in list(self.runs.values()) + list(self.finishing.values()):
            self.sys.ledger.mark(run.attempt.task_id, "crash", self.label)
        self.runs, self.finishing = {}, {}
        self.sys.unidle(self)

    # -- the slot loop -----------------------------------------------------------------------
    def _claim(self, slot: int) -> None:
        if self.stopping:
            return
        try:
            delivery = self.proc.claim()
        except Unavailable as exc:
            self.after(self.outage.failed(exc) * 1000, functools.partial(self._claim, slot))
            return
        if delivery is None:
            self.outage.ok()
            self.sys.idle_slot(self, slot, functools.partial(self._claim, slot), IDLE_POLL_MS)
            return
        self.busy.add(slot)
        self.point("after_claim")
        self.after(self.sys.op_latency(), functools.partial(self._begin, slot, delivery, self.world.now))

    def _begin(self, slot: int, delivery: Any, claimed_at: int) -> None:
        try:
            attempt = self.proc.begin(delivery)
        except Unavailable as exc:
            try:  # the database is down: hand the payload back now rather than at lease expiry
                self.queue.requeue(delivery.token, front=True)
            except Exception:  # noqa: BLE001 - best effort, as WorkerPool._quietly
                pass
            self.busy.discard(slot)
            self.after(self.outage.failed(exc) * 1000, functools.partial(self._claim, slot))
            return
        self.outage.ok()
        if attempt is None:
            return self._next(slot)
        self.sys.llm.last_latency_ms = 0
        outcome = self.proc.review(attempt)
        latency = self.sys.llm.last_latency_ms
        run = Run(attempt, outcome, claimed_at)
        self.runs[slot] = run
        if self.stopping:
            self._expect_release(run)
        if latency is not None:
            self.after(latency, functools.partial(self._complete, slot, run))
        self.after(self.beat_ms, functools.partial(self._beat, slot, run))

    def _beat(self, slot: int, run: Run) -> None:
        if self.runs.get(slot) is not run:
            return
        if self.proc.overran(run.attempt):
            limit = self.proc.lease.max_runtime_seconds
            return self._settle(slot, run, Outcome.retryable(f"attempt exceeded PROCESSING_TIMEOUT_SECONDS={limit:g}"))
        if self.world.now >= self.no_beat_until:
            try:
                alive = self.proc.heartbeat(run.attempt)
            except Unavailable:
                alive = True  # keep going: the fenced commit decides
            else:
                if alive:
                    run.last_renew = self.world.now
            if not alive:
                self.sys.lease_lost(run)
                del self.runs[slot]
                return self._next(slot)
        self.after(self.beat_ms, functools.partial(self._beat, slot, run))

    def _complete(self, slot: int, run: Run) -> None:
        if self.runs.get(slot) is run:
            self._settle(slot, run, run.outcome)

    def _settle(self, slot: int, run: Run, outcome: Outcome) -> None:
        self.runs.pop(slot, None)
        self.finishing[slot] = run
        self._finish(slot, run, outcome, self.world.now + self.sys.lease_ms, 200)

    def _finish(self, slot: int, run: Run, outcome: Outcome, give_up: int, delay: int) -> None:
        """WorkerPool._finish: retried while a service is down, for about one lease."""
        self.point("before_finish")
        try:
            self.proc.finish(run.attempt, outcome)
        except Unavailable:
            if self.world.now + delay > give_up:
                self.world.log("note", "could not record the outcome; the reaper will settle it", run.attempt.task_id)
                return self._next(slot)
            self.after(delay, functools.partial(self._finish, slot, run, outcome, give_up, min(delay * 2, 5_000)))
            return
        self._next(slot)

    def _next(self, slot: int) -> None:
        self.busy.discard(slot)
        self.finishing.pop(slot, None)
        if self.stopping:
            self._maybe_exit()
        else:
            self.after(1, functools.partial(self._claim, slot))

    # -- SIGTERM (D11) -----------------------------------------------------------------------
    def sigterm(self) -> None:
        if not self.alive or self.stopping:
            return
        grace = int(self.sys.settings.shutdown_grace_seconds * 1000)
        self.stopping, self.drain_deadline = True, self.world.now + grace
        self.sys.unidle(self)
        for run in self.runs.values():
            self._expect_release(run)
        self.after(grace, self._release_all)
        self.after(grace + 5_000, lambda: self.exit("shut down (grace over)", self.sys.restart_delay()))
        self._maybe_exit()

    def _expect_release(self, run: Run) -> None:
        by = (self.drain_deadline or self.world.now) + 2_000
        self.sys.checker.expect_release(run.attempt.task_id, run.attempt.number, by,
                                        f"{self.label} was stopped with SIGTERM", self.label)

    def crash(self, why: str, count: bool = True) -> None:
        if self.alive:
            self.sys.checker.forget_releases(self.label)
        super().crash(why, count)

    def _release_all(self) -> None:
        for slot, run in list(self.runs.items()):
            self._settle(slot, run, Outcome.release("worker shut down before the attempt finished"))

    def _maybe_exit(self) -> None:
        if self.stopping and not self.busy and self.alive:
            self.exit("shut down (drained)", self.sys.restart_delay())


class PeriodicActor(ProductActor):
    """``PeriodicLoop``: one service step per interval, backing off while a service is down."""

    interval_ms = 5_000

    def start(self) -> None:
        self.outage = Outage(self.kind, quiet_logger())
        self.service = self.make_service()
        # The first processes start at different moments; a restarted one cycles at once.
        first = self.sys.rng.uniform(0, self.interval_ms) if self.incarnation == 1 else 1
        self.after(first, self._cycle)

    def make_service(self) -> Any:
        raise NotImplementedError

    def step(self) -> bool:
        raise NotImplementedError

    def _cycle(self) -> None:
        wait = self.interval_ms
        try:
            more = self.step()
            self.outage.ok()
            if more:
                wait = 0
        except Unavailable as exc:
            wait = max(wait, int(self.outage.failed(exc) * 1000))
        except Exception as exc:  # noqa: BLE001 - PeriodicLoop logs and goes on; here it is reported
            self.sys.error(self, exc)
        self.after(max(1, wait), self._cycle)


class ReaperActor(PeriodicActor):
    kind = "reaper"

    def make_service(self) -> Any:
        self.interval_ms = self.sys.interval_ms
        queue, repo = self.ports()
        return self.sys.reaper(queue, repo, self.label)

    def step(self) -> bool:
        before = self.budget.calls
        n = self.service.reap_once()
        self.sys.checker.reaper_cycle(self.label, self.budget.calls - before, n, n)
        return n >= self.service.batch


class ReconcilerActor(PeriodicActor):
    kind = "reconciler"

    def make_service(self) -> Any:
        self.interval_ms = int(self.sys.settings.reconcile_interval_seconds * 1000)
        queue, repo = self.ports()
        return self.sys.reconciler(queue, repo)

    def step(self) -> bool:
        self.service.reconcile_once()
        return False

    def crash(self, why: str, count: bool = True) -> None:
        if self.alive and ("queue.push" in why or "repo.retry" in why or "end of its step" in why):
            self.sys.ledger.cause(None, f"{self.label} crashed between a row's recovery and its push")
        super().crash(why, count)


class Producer(ProductActor):
    """The platform's back end: submits the run's tasks at their arrival times (row, then push)."""

    kind = "producer"

    def start(self) -> None:
        self.queue, self.repo = self.ports()
        for at, name, doc in self.sys.pending_arrivals(self):
            self.world.at(at, functools.partial(self._submit, name, doc), self)

    def _submit(self, name: str, doc: str) -> None:
        if not self.sys.arrival_open(name):
            return
        before = len(self.sys.ledger.books)
        try:
            submit(self.repo, self.queue, name, doc, events=self.sys.events)
        except Unavailable:
            if len(self.sys.ledger.books) > before:  # the row is in, the push failed
                self.sys.arrival_done(name)
                self.sys.ledger.cause(max(self.sys.ledger.books), "the producer's push failed after its insert")
                return
            self.after(2_000, functools.partial(self._submit, name, doc))
            return
        except Crash:
            if len(self.sys.ledger.books) > before:
                self.sys.arrival_done(name)
                self.sys.ledger.cause(max(self.sys.ledger.books), "the producer died between its insert and its push")
            raise
        self.sys.arrival_done(name)


class Operator(ProductActor):
    """Now and then retries what is in the dead-letter list (``docllm retry``)."""

    kind = "operator"

    def start(self) -> None:
        self.queue, self.repo = self.ports()
        self.after(self.sys.rng.uniform(20_000, 60_000), self._retry)

    def _retry(self) -> None:
        if not self.sys.faults_active:
            return
        try:
            reopened = retry_dead(self.repo, self.queue, None, events=self.sys.events)
            if reopened:
                self.world.log("note", f"operator reopened {reopened}")
        except Unavailable:
            pass
        except Crash:
            self.sys.ledger.cause(None, f"{self.label} died during retry_dead")
            raise
        self.after(self.sys.rng.uniform(30_000, 90_000), self._retry)
