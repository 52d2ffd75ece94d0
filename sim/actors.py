"""The product's actors: processes that run the product's runtime (``docllm.runtime``) itself,
its ``Worker`` and its ``PeriodicLoop``s, over the real domain services built by the container.

Only the environment is simulated (``sim.aio``): each port call takes a simulated round trip and
goes through the actor's crash budget, waiting for work is told by the system, and the LLM answers
on virtual time. A crash cancels every coroutine of the process; a dead process makes no call.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from docllm.domain.errors import Unavailable
from docllm.domain.services.producer import retry_dead, submit
from docllm.runtime.assembly import build_worker, reap_step, reconcile_step
from docllm.runtime.periodic import PeriodicLoop
from docllm.runtime.worker import Worker
from sim.aio import SimPortCalls
from sim.fault_injection import Crash, Faulty
from sim.observers import LostReplies
from sim.world import Actor

if TYPE_CHECKING:  # pragma: no cover
    from sim.product import ProductSystem


class ProductActor(Actor):
    def __init__(self, system: ProductSystem, name: str):
        super().__init__(system.world, name)
        self.sys = system
        self.no_beat_until = self.last_no_beat_end = 0
        self.lost_replies = 0  # database writes to come whose reply is lost (sim.faults)

    def ports(self) -> tuple[Any, Any]:
        queue, repo = self.sys.ports_for(self)
        return Faulty(queue, self.budget, "queue"), Faulty(LostReplies(repo, self), self.budget, "repo")

    def breaker(self) -> Any:
        """The fleet's LLM breaker (breaker.lua on the run's Redis), through this actor's faults."""
        return Faulty(self.sys.gated_breaker, self.budget, "breaker")

    def port_calls(self) -> SimPortCalls:
        return SimPortCalls(self, self.sys.ready_wait)

    def skip_call(self, fn: Any, args: tuple[Any, ...]) -> Any:
        """The "stops heartbeating but keeps working" fault: renewals are not sent, and the
        runtime is told they went through (a stuck heartbeat, not a lost one)."""
        if getattr(fn, "__name__", "") == "heartbeat_many" and self.world.now < self.no_beat_until:
            return [True] * len(args[0])
        return None


# How long a dispatcher's blocking wait lasts before it claims again (production: 1 s). The system
# wakes a waiter as soon as ready has a payload, as Redis does; the timeout only matters for due
# retries, which the reapers promote every interval anyway. A long one keeps runs cheap.
IDLE_WAIT_S = 30.0


class WorkerActor(ProductActor):
    kind = "worker"

    def __init__(self, system: ProductSystem, name: str, slots: int):
        super().__init__(system, name)
        self.slots = slots
        self.worker: Worker | None = None
        self.stopping = False

    @property
    def runs(self) -> dict[str, Any]:
        return self.worker.running if self.worker is not None and self.alive else {}

    def start(self) -> None:
        queue, repo = self.ports()
        llm = self.sys.llm.for_host(self.name)  # this host's link: a partition cuts it alone
        proc = self.sys.processor(queue, repo, worker_id=self.label, reviewer=llm)
        logger, brk, s = self.sys.logger, self.sys.brk, self.sys.settings
        self.worker = build_worker(
            proc,
            llm,
            self.breaker(),
            self.port_calls(),
            self.label,
            self.slots,
            s.breaker_open_seconds,
            self.sys.events,
            IDLE_WAIT_S,
            gate_logger=logger,
            worker_logger=logger,
            adapt=(lambda p, g: (brk.wrap_processor(p), brk.wrap_gate(g))) if brk is not None else None,
        )
        self.stopping = False
        self.spawn(self._main(), name=f"{self.label}-main")

    async def _main(self) -> None:
        assert self.worker is not None
        await self.worker.run()
        self.exit("shut down (drained)", self.sys.restart_delay())

    def on_stop(self) -> None:
        for run in self.runs.values():
            self.sys.ledger.mark(run.attempt.task_id, "crash", self.label)
        self.worker = None

    # -- SIGTERM (D11) -----------------------------------------------------------------------
    def sigterm(self) -> None:
        if not self.alive or self.stopping or self.worker is None:
            return
        grace = int(self.sys.settings.shutdown_grace_seconds * 1000)
        self.stopping = True
        by = self.world.now + grace + 2_000
        for run in self.worker.running.values():
            self.sys.checker.expect_release(
                run.attempt.task_id, run.attempt.number, by, f"{self.label} was stopped with SIGTERM", self.label
            )
        self.worker.stop(grace / 1000)
        # The orchestrator kills what has not exited some time after the grace period.
        self.after(
            grace + self.sys.lease_ms + 10_000,
            lambda: self.exit("killed after the stop timeout", self.sys.restart_delay()),
        )

    def crash(self, why: str, count: bool = True) -> None:
        if self.alive:
            self.sys.checker.forget_releases(self.label)
        super().crash(why, count)


class LoopActor(ProductActor):
    """A process that runs one ``PeriodicLoop`` (the reaper, the reconciler)."""

    interval_s = 5.0

    def start(self) -> None:
        step = self.make_step()
        self.loop = PeriodicLoop(self.kind, step, self.interval_s, self.port_calls(), self.sys.logger)
        self.spawn(self._main(), name=f"{self.label}-main")

    async def _main(self) -> None:
        # The first processes start at different moments; a restarted one cycles at once.
        first = self.sys.rng.uniform(0, self.interval_s) if self.incarnation == 1 else 0.001
        await asyncio.sleep(first)
        await self.loop.run(asyncio.Event())

    def make_step(self) -> Any:
        raise NotImplementedError


class ReaperActor(LoopActor):
    kind = "reaper"

    def make_step(self) -> Any:
        self.interval_s = self.sys.interval_ms / 1000
        queue, repo = self.ports()
        service = self.sys.reaper(queue, repo, self.label)
        service.rng = self.world.rng_for(f"reaper-batches-{self.label}")  # seeded: the run stays a replay

        calls_before = [0]  # the port calls made before this cycle (D8: the cycle's round trips)

        def reaped(n: int) -> None:
            self.sys.checker.reaper_cycle(self.label, self.budget.calls - calls_before[0], n, n)

        step = reap_step(service, reaped)

        def counted_step() -> bool:
            calls_before[0] = self.budget.calls
            return step()

        return counted_step


class ReconcilerActor(LoopActor):
    kind = "reconciler"

    def make_step(self) -> Any:
        self.interval_s = self.sys.settings.reconcile_interval_seconds
        queue, repo = self.ports()
        service = self.sys.reconciler(queue, repo)

        return reconcile_step(service)

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
