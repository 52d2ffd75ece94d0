"""Everything one process runs, on one event loop: the worker and/or the reaper and reconciler loops.

``docllm worker`` runs all three (as the original note's ``__main__`` ran its reaper thread);
``docllm reaper`` runs the loops alone. Built from ports and services by
``entrypoints.bootstrap.build_service``; it never sees the container.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from docllm.domain.batches.batcher import Batcher
from docllm.domain.batches.poller import BatchPoller
from docllm.domain.batches.ports import BatchStore
from docllm.domain.lanes.ports import LaneViews
from docllm.domain.llm.ports import LlmBreaker, SpendBudget
from docllm.domain.review.ports import DocumentReviewer
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.ports import TaskQueue, WorkerRegistry
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from docllm.runtime import exit_watchdog, heap
from docllm.runtime.assembly import Wiring, batcher_tick, build_worker, keep_step, reap_step, reconcile_step
from docllm.runtime.periodic import PeriodicLoop
from docllm.runtime.port_calls import ThreadedPortCalls, threads_for
from docllm.runtime.presence import Presence, beat_seconds
from docllm.runtime.waiting import sleep_unless
from docllm.runtime.worker import Worker
from docllm.settings import Settings

# A stop's budget: the loops' current cycles end within the worker's (grace, then its releases) or
# this, whichever is longer; leaving the worker registry then gets this much (its TTL removes a
# record left behind).
LOOPS_END_SECONDS = 1.0
LEAVE_SECONDS = 1.0
REVIEWER_CLOSE_SECONDS = 1.0  # closing pools is local work; a stop must not wait on it
# A child of ``docllm worker --processes`` writes its scrape-time gauges this often.
PUBLISH_SECONDS = 2.0


@dataclass
class Parts:
    """What a process runs: a processor (and the reviewer it uses) for the worker, the reaper and
    the reconciler for the loops; metrics and readiness checks for the HTTP port."""

    queue: TaskQueue
    processor: TaskProcessor | None = None
    reviewer: DocumentReviewer | None = None
    breaker: LlmBreaker | None = None  # the fleet's LLM breaker (the worker's)
    budget: SpendBudget | None = None  # the fleet's spend cap (the worker's, I14); None: spend not counted
    reaper: Reaper | None = None
    reconciler: Reconciler | None = None
    metrics: Any = None
    readiness: dict[str, Any] = field(default_factory=dict)
    web_app: Any = None  # a WSGI app served on the HTTP port's other paths (the dashboard)
    registry: WorkerRegistry | None = None  # where a worker process reports itself (docllm workers)
    lanes: LaneViews | None = None  # the figures per lane and tenant the HTTP port's metrics show
    batcher: Batcher | None = None  # the batch lane's (issue 28): bulk tasks into provider batches
    poller: BatchPoller | None = None  # the batch lane's: any process polls any batch
    batches: BatchStore | None = None  # the provider batches per state the HTTP port's metrics show


class Service:
    """``wiring``: how the parts reach their ports and where they log (the simulation runs this
    same class on virtual time with its own)."""

    def __init__(self, settings: Settings, parts: Parts, wiring: Wiring | None = None, http: bool = True):
        """``http=False``: a child of ``docllm worker --processes``; its parent serves the HTTP
        port and sums the metrics every child writes to the multiprocess directory."""
        self.settings, self.parts, self.wiring, self.http = settings, parts, wiring or Wiring(), http
        self.log = self.wiring.log("service")
        self.calls = self.wiring.calls or ThreadedPortCalls(threads_for(settings.concurrency if parts.processor else 1))
        self.worker: Worker | None = None
        self.presence: Presence | None = None
        self.loops: list[PeriodicLoop] = []
        self.endpoints: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.started = threading.Event()

    def _build(self) -> None:
        s, p, m, w = self.settings, self.parts, self.parts.metrics, self.wiring
        if p.processor is not None and p.reviewer is not None and p.breaker is not None:
            self.worker = build_worker(
                p.processor,
                p.reviewer,
                p.breaker,
                self.calls,
                s.worker_id,
                s.concurrency,
                s.breaker_open_seconds,
                p.processor.events,
                w,
                p.budget,
                s.store_linger_ms / 1000,
            )
            if p.registry is not None:
                period = beat_seconds(s.lease_seconds)
                self.presence = Presence(p.registry, p.queue, self.calls, self.worker, s.worker_id, period)
        if p.reaper is not None:
            self._loop_of("reaper", reap_step(p.reaper), s.reaper_interval_seconds, m and m.reaper_cycle)
        if p.reconciler is not None:
            every = s.reconcile_interval_seconds
            self._loop_of("reconciler", reconcile_step(p.reconciler), every, m and m.reconcile_cycle)
        for name, batch_part, tick in (
            ("batcher", p.batcher, batcher_tick(s.batch_max_wait_seconds, s.batch_lease_seconds)),
            ("batch-poller", p.poller, s.batch_lease_seconds),
        ):
            if batch_part is not None:  # its step, and beside it the renewal of the leases it holds
                self._loop_of(name, batch_part.step, tick, None)
                # Three renewals per batch lease: at one per TTL, a tick a little late lost the lease
                # of a long visit (a slow retrieve, a large apply) to another poller (the e2e saw it).
                self._loop_of(f"{name}-keep", keep_step(batch_part), s.batch_lease_seconds / 3, None)

    def _loop_of(self, name: str, step: Callable[[], bool], interval: float, cycles: Any) -> None:
        on_cycle = cycles.observe if cycles else None
        w = self.wiring
        self.loops.append(PeriodicLoop(name, w.step(name, step), interval, self.calls, w.log(name), on_cycle=on_cycle))

    # -- running -----------------------------------------------------------------------------
    async def run(self, signals: bool = False) -> None:
        """Run until a stop is requested, then drain and return."""
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._build()
        if signals:  # the program's main: the process is this service's
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(sig, self.request_stop)
            heap.settle()  # after the handlers: a SIGTERM during its collection is a stop, not a kill
        s = self.settings
        # Said once the handlers exist: a supervisor (the chaos harness) may SIGTERM from this line on.
        self.log.info(
            "starting: worker=%s concurrency=%s lease=%ss reaper_interval=%ss provider=%s",
            s.worker_id,
            s.concurrency if self.worker else 0,
            s.lease_seconds,
            s.reaper_interval_seconds,
            s.llm_provider,
        )
        beating: asyncio.Task[None] | None = None
        publishing: asyncio.Task[None] | None = None
        drained = asyncio.Event()
        try:
            self._start_endpoints()  # first: a port already taken stops the process before it claims
            self.tasks = {loop.name: asyncio.create_task(loop.run(self._stop), name=loop.name) for loop in self.loops}
            if self.worker is not None:
                self.tasks["worker"] = asyncio.create_task(self.worker.run(), name="worker")
            if self.presence is not None:
                beating = asyncio.create_task(self.presence.run(drained), name="presence")
            if self.parts.metrics is not None and not self.http:
                publishing = asyncio.create_task(self._publish(), name="publish-gauges")
            self.started.set()
            await self._stop.wait()
            await self._end_tasks()
            await self._release_batch_claims()
            drained.set()
            if beating is not None:  # removes this worker from the registry (or its TTL will)
                await asyncio.wait([beating], timeout=LEAVE_SECONDS)
        finally:
            for task in (beating, publishing):
                if task is not None:
                    task.cancel()
            if self.endpoints:
                self.endpoints.stop()
            await self._close_reviewer()
            self.calls.close()
            self.log.info("stopped")
            if signals:  # the program's main: it must now exit
                exit_watchdog.arm()

    async def _close_reviewer(self) -> None:
        """Close the reviewer's HTTP pools (when it has any) on this loop, which they belong to:
        left to the garbage collector they log "Unclosed client session" into whatever runs next."""
        close = getattr(self.parts.reviewer, "close", None)
        if close is None:
            return
        try:
            await asyncio.wait_for(close(), timeout=REVIEWER_CLOSE_SECONDS)
        except Exception as exc:  # noqa: BLE001 - the process is stopping; say so and go on
            self.log.warning("closing the reviewer: %s", exc)

    async def _release_batch_claims(self) -> None:
        """The batcher's claims held for its next batch back to their lane at once (D11), within
        the loops' budget; what is not released expires and the reaper requeues it."""
        batcher = self.parts.batcher
        if batcher is None:
            return
        try:
            await asyncio.wait_for(self.calls.call(batcher.release), timeout=LOOPS_END_SECONDS)
        except Exception as exc:  # noqa: BLE001 - the process is stopping; the leases expire
            self.log.warning("batch claims not released: %s", exc)

    async def _end_tasks(self) -> None:
        """Wait for the worker's drain and the loops' current cycles, until the stop's deadline:
        a call that hangs (Redis or the database gone) must not keep the process from exiting."""
        loop = asyncio.get_running_loop()
        w = self.worker
        # The loops were told to stop with the worker: they end their cycle within its deadline.
        deadline = max(w.exit_deadline if w and w.exit_deadline else 0.0, loop.time() + LOOPS_END_SECONDS)
        done, hung = await asyncio.wait(self.tasks.values(), timeout=max(0.0, deadline - loop.time()))
        for name, task in self.tasks.items():
            if task in hung:
                self.log.warning("%s did not end by the stop's deadline; stopping it", name)
                task.cancel()
            elif not task.cancelled() and task.exception() is not None:
                exc = task.exception()
                self.log.error("%s ended with %s: %s", name, type(exc).__name__, exc)

    def _start_endpoints(self) -> None:
        m = self.parts.metrics
        if m is None or not self.http:
            return
        from docllm.runtime.http_endpoints import HttpEndpoints

        port = self.settings.metrics_port
        assert port is not None  # container.py builds metrics only when the port is set
        worker, budget = self.worker, self.parts.budget
        # The reaper exports 0 attempts: the autoscaler reads the number even while no worker runs.
        in_flight = (lambda: worker.in_flight) if worker else (lambda: 0)
        m.watch(self.parts.queue, in_flight, (lambda: budget.view().over) if budget else None)
        if self.parts.lanes is not None:
            m.watch_lanes(self.parts.lanes)
        if self.parts.batches is not None:
            m.watch_batches(self.parts.batches)
        self.endpoints = HttpEndpoints(
            self.settings.metrics_host, port, m.registry, self.healthy, self.parts.readiness, self.parts.web_app
        ).start()

    async def _publish(self) -> None:
        """A child of ``--processes``: its gauges to the multiprocess files, every few seconds
        until the stop (the parent serves them; ``_start_endpoints`` reads them at scrape time)."""
        assert self._stop is not None
        worker, budget = self.worker, self.parts.budget
        stopped = (lambda: budget.view().over) if budget else None
        refresh = self.parts.metrics.publish(self.parts.queue, (lambda: worker.in_flight) if worker else None, stopped)
        while not self._stop.is_set():
            try:
                await self.calls.call(refresh)
            except Exception as exc:  # noqa: BLE001 - a missed reading; the next one comes
                self.log.debug("gauges not published: %s", exc)
            await sleep_unless(self._stop, PUBLISH_SECONDS)

    def run_forever(self) -> None:
        """The program's main: SIGTERM and SIGINT request a stop."""
        asyncio.run(self.run(signals=True))

    def request_stop(self, *_: object) -> None:
        """Stop claiming; in-flight attempts get the shutdown grace. Safe from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():  # not started, or already over
            return
        if not _runs(loop):  # another thread: the stop is the loop's to make
            loop.call_soon_threadsafe(self.request_stop)
            return
        assert self._stop is not None
        if not self._stop.is_set():
            grace = self.settings.shutdown_grace_seconds
            self.log.info("stop requested: no new claims; in-flight attempts get %ss", grace)
            if self.worker:
                self.worker.stop(grace)
            self._stop.set()

    # -- in a thread (tests, the benchmark) --------------------------------------------------
    def start(self) -> Service:
        self._thread = threading.Thread(target=lambda: asyncio.run(self.run()), name="docllm-service", daemon=True)
        self._thread.start()
        self.started.wait(30)
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Request a stop and wait for the drain; True when the service ended."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    # -- health ------------------------------------------------------------------------------
    def healthy(self) -> tuple[bool, list[str]]:
        if self._loop is None or self._stop is None or self._stop.is_set():  # draining: the loops end on purpose
            return True, []
        now = self._loop.time()  # the loops' beats are on it (monotonic; virtual in the simulation)
        dead = [name for name, task in self.tasks.items() if task.done()]
        problems = [f"{loop.name} loop stalled" for loop in self.loops if loop.name in dead or loop.stalled(now)]
        w = self.worker
        if "worker" in dead:
            problems.append("worker dispatcher died")
        elif w is not None and w.last_beat is not None and now - w.last_beat > 120.0 and w.free_slots > 0:
            problems.append("worker dispatcher stalled")
        return not problems, problems


def _runs(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
