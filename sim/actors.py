"""The product's actors: processes that run the product's runtime (``docllm.runtime``) itself,
its ``Service`` (the worker, its presence, the reaper's and reconciler's loops, stop deadlines and
health), over the real domain services built by the container.

Only the environment is simulated (``sim.aio``): each port call takes a simulated round trip and
goes through the actor's crash budget, waiting for work is told by the system, and the LLM answers
on virtual time. A crash cancels every coroutine of the process; a dead process makes no call.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from docllm.domain.errors import Unavailable
from docllm.domain.tasks.producer import retry_dead, submit
from docllm.domain.tasks.reaper import Reaper
from docllm.runtime.assembly import Wiring
from docllm.runtime.service import Service
from docllm.runtime.worker import Worker
from sim.aio import SimPortCalls
from sim.batches import batch_lane_for
from sim.fault_injection import Crash, Faulty
from sim.lanes import lane_for
from sim.observers import LostReplies, StuckBeats
from sim.world import Actor

if TYPE_CHECKING:  # pragma: no cover
    from sim.product import ProductSystem


class ProductActor(Actor):
    def __init__(self, system: ProductSystem, name: str):
        super().__init__(system.world, name)
        self.sys = system
        self.no_beat_until = self.last_no_beat_end = 0
        self.lost_replies = 0  # database writes to come whose reply is lost (sim.faults)
        self.lost_start_replies = 0  # the same for its groups of starts (worker:start_reply_lost)

    def ports(self) -> tuple[Any, Any]:
        queue, repo = self.sys.ports_for(self)
        queue = StuckBeats(Faulty(queue, self.budget, "queue"), self)  # a stuck heartbeat sends nothing
        return queue, Faulty(LostReplies(repo, self), self.budget, "repo")

    def breaker(self) -> Any:
        """The fleet's LLM breaker (breaker.lua on the run's Redis), through this actor's faults."""
        return Faulty(self.sys.gated_breaker, self.budget, "breaker")

    def port_calls(self) -> SimPortCalls:
        return SimPortCalls(self, self.sys.ready_wait)


# How long a dispatcher's blocking wait lasts before it claims again (production: 1 s). The system
# wakes a waiter as soon as ready has a payload, as Redis does; the timeout only matters for due
# retries, which the reapers promote every interval anyway. A long one keeps runs cheap.
IDLE_WAIT_S = 30.0


class ServiceActor(ProductActor):
    """A process that runs ``docllm.runtime.service.Service``, as ``docllm worker`` and ``docllm
    reaper`` do: built from the run's container by ``entrypoints.bootstrap.build_parts``, on this
    actor's ports, port calls and logger."""

    roles: tuple[str, ...] = ()
    service: Service | None = None

    @property
    def worker_id(self) -> str:
        """The process identity: each incarnation its own (a new pid), which I8 reads."""
        return self.label

    def build(self, **overrides: Any) -> Service:
        brk = self.sys.brk
        adapt = (lambda p, g: (brk.wrap_processor(p), brk.wrap_gate(g))) if brk is not None else None
        wiring = Wiring(self.port_calls(), IDLE_WAIT_S, self.sys.logger, adapt)
        self.service = self.sys.service(self, self.roles, wiring, **overrides)
        self.booted_at = self.world.now
        return self.service

    def healthy(self) -> tuple[bool, list[str]]:
        """What the process's /healthz would answer now."""
        return self.service.healthy() if self.service is not None and self.alive else (True, [])


class WorkerActor(ServiceActor):
    kind = "worker"
    roles = ("worker",)

    def __init__(self, system: ProductSystem, name: str, slots: int):
        super().__init__(system, name)
        self.slots = slots
        self.stopping = False

    @property
    def worker(self) -> Worker | None:
        return self.service.worker if self.service is not None else None

    @property
    def runs(self) -> dict[str, Any]:
        return self.worker.running if self.worker is not None and self.alive else {}

    def start(self) -> None:
        # This host's link to the LLM (a partition cuts it alone), the fleet's breaker and the
        # worker registry, each through this actor's faults.
        self.build(
            reviewer=self.sys.reviewer_for(self),
            breaker=self.breaker(),
            worker_registry=Faulty(self.sys.gated_registry, self.budget, "registry"),
        )
        self.stopping = False
        self.spawn(self._main(), name=f"{self.label}-main")

    async def _main(self) -> None:
        assert self.service is not None
        await self.service.run()
        self.exit("shut down (drained)", self.sys.restart_delay())

    def on_stop(self) -> None:
        for run in self.runs.values():
            self.sys.ledger.mark(run.attempt.task_id, "crash", self.label)
        self.service = None

    # -- SIGTERM (D11) -----------------------------------------------------------------------
    def sigterm(self) -> None:
        if not self.alive or self.stopping or self.worker is None or self.service is None:
            return
        grace = int(self.sys.settings.shutdown_grace_seconds * 1000)
        self.stopping = True
        by = self.world.now + grace + 2_000
        for run in self.worker.running.values():
            self.sys.checker.expect_release(
                run.attempt.task_id, run.attempt.number, by, f"{self.label} was stopped with SIGTERM", self.label
            )
        self.service.request_stop()
        # The orchestrator kills what has not exited some time after the grace period.
        self.after(
            grace + self.sys.lease_ms + 10_000,
            lambda: self.exit("killed after the stop timeout", self.sys.restart_delay()),
        )

    def crash(self, why: str, count: bool = True) -> None:
        if self.alive:
            self.sys.checker.forget_releases(self.label)
        super().crash(why, count)


class LoopActor(ServiceActor):
    """A process that runs one ``PeriodicLoop`` (the reaper, the reconciler): ``docllm reaper``."""

    def interval_s(self) -> float:
        raise NotImplementedError

    def start(self) -> None:
        self.prepare(self.build())
        self.spawn(self._main(), name=f"{self.label}-main")

    def prepare(self, service: Service) -> None:
        pass

    async def _main(self) -> None:
        # The first processes start at different moments; a restarted one cycles at once.
        first = self.sys.rng.uniform(0, self.interval_s()) if self.incarnation == 1 else 0.001
        await asyncio.sleep(first)
        assert self.service is not None
        await self.service.run()


class CountedReaper:
    """The reaper as its loop calls it, each cycle's port calls counted for the checker (D8)."""

    def __init__(self, reaper: Reaper, actor: ProductActor):
        self._reaper, self._actor = reaper, actor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reaper, name)

    def reap_once(self) -> int:
        self._actor.cycled()
        before = self._actor.budget.calls
        settled = self._reaper.reap_once()
        self._actor.sys.checker.reaper_cycle(self._actor.label, self._actor.budget.calls - before, settled, settled)
        return settled


class ReaperActor(LoopActor):
    """``docllm reaper``. For I1 it counts as running (``ready_reaper``) from half a lease after its
    first cycle, its clock's first reading: its verdicts wait that long (RedisServerClock.verdict_ms)."""

    kind = "reaper"
    roles = ("reaper",)

    def __init__(self, system: ProductSystem, name: str):
        super().__init__(system, name)
        self.ready_at: int | None = None
        self.counted_ready = False
        if not self.world.live.get("ready_reaper"):
            self.world.windows.open("no_ready_reaper", self.world.now)
        self.world.after_event.insert(0, self.sync_ready)  # before the checker looks

    def interval_s(self) -> float:
        return self.sys.interval_ms / 1000

    def boot(self) -> None:
        self.ready_at = None
        super().boot()

    def cycled(self) -> None:
        if self.ready_at is None:
            self.ready_at = self.world.now + self.sys.lease_ms // 2
            self.world.at(self.ready_at, lambda: None)  # an event then, so that sync_ready sees it

    def sync_ready(self) -> None:
        now = self.world.now
        ready = self.alive and self.paused_until <= now and self.ready_at is not None and self.ready_at <= now
        if ready != self.counted_ready:
            self.counted_ready = ready
            self.world.set_live("ready_reaper", 1 if ready else -1)

    def prepare(self, service: Service) -> None:
        reaper = service.parts.reaper
        assert reaper is not None
        reaper.rng = self.world.rng_for(f"reaper-batches-{self.label}")  # seeded: the run stays a replay
        service.parts.reaper = CountedReaper(reaper, self)  # type: ignore[assignment]


class ReconcilerActor(LoopActor):
    kind = "reconciler"
    roles = ("reconciler",)

    def interval_s(self) -> float:
        return self.sys.settings.reconcile_interval_seconds

    @property
    def worker_id(self) -> str:
        """The same across restarts (a container restarted in its pod: same host, pid 1), so a
        restarted reconciler takes its lead back at once instead of after the lead's TTL."""
        return self.name

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
            if self.sys.scenario.batches is not None:  # mostly bulk: the batch lane's (sim/batches.py)
                priority, tenant = batch_lane_for(name)
            else:
                priority, tenant = lane_for(name) if self.sys.scenario.lanes else (None, None)
            submit(self.repo, self.queue, name, doc, events=self.sys.events, priority=priority, tenant=tenant)
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
