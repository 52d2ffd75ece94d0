"""Everything one process runs: worker slots and/or the reaper and reconciler loops.

``docllm worker`` runs all three (as the original note's ``__main__`` ran its reaper thread);
``docllm reaper`` runs the loops alone.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

from docllm.container import Container
from docllm.runtime.config_gate import ConfigGate
from docllm.runtime.periodic import PeriodicLoop
from docllm.runtime.worker_pool import WorkerPool

log = logging.getLogger("docllm.service")


class Service:
    def __init__(self, container: Container, workers: bool = True, reaper: bool = True):
        self.container = container
        self.settings = container.settings()
        self.stop_event = threading.Event()
        self.pool: WorkerPool | None = None
        self.loops: list[PeriodicLoop] = []
        self.metrics = container.metrics()  # None unless DOCLLM_METRICS_PORT is set
        self.endpoints = None
        if workers:
            gate = ConfigGate(container.reviewer(), logging.getLogger("docllm.llm"))
            self.pool = WorkerPool(container.processor, container.queue(), gate, self.settings.concurrency)
        if reaper:
            reaper_service, reconciler = container.reaper(), container.reconciler()

            def reap() -> bool:  # a full batch means more may be waiting: go again at once
                return reaper_service.reap_once() >= reaper_service.batch

            def reconcile() -> bool:
                reconciler.reconcile_once()
                return False

            m = self.metrics
            self.loops.append(PeriodicLoop("reaper", reap, self.settings.reaper_interval_seconds,
                                           self.stop_event, logging.getLogger("docllm.reaper"),
                                           on_cycle=m.reaper_cycle.observe if m else None))
            self.loops.append(PeriodicLoop("reconciler", reconcile, self.settings.reconcile_interval_seconds,
                                           self.stop_event, logging.getLogger("docllm.reconciler"),
                                           on_cycle=m.reconcile_cycle.observe if m else None))

    def start(self) -> Service:
        s = self.settings
        log.info("starting: worker=%s concurrency=%s lease=%ss reaper_interval=%ss provider=%s",
                 s.worker_id, s.concurrency if self.pool else 0, s.lease_seconds,
                 s.reaper_interval_seconds, s.llm_provider)
        if self.metrics is not None:  # first: a port already taken stops the process before it claims
            from docllm.runtime.http_endpoints import HttpEndpoints

            pool = self.pool
            self.metrics.watch(self.container.queue(), (lambda: pool.in_flight) if pool else None)
            self.endpoints = HttpEndpoints(s.metrics_host, s.metrics_port, self.metrics.registry,
                                           self.healthy, self.container.readiness()).start()
        if self.pool:
            self.pool.start()
        for loop in self.loops:
            loop.start()
        return self

    def request_stop(self, *_: object) -> None:
        if not self.stop_event.is_set():
            log.info("stop requested: no new claims; in-flight attempts get %ss",
                     self.settings.shutdown_grace_seconds)
            if self.pool:
                self.pool.stop(self.settings.shutdown_grace_seconds)
            self.stop_event.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    def wait(self) -> None:
        """Block until a stop is requested, then drain and return."""
        while not self.stop_event.wait(0.5):
            pass
        if self.pool:
            # Slots release what is still running at the grace deadline; allow them a moment more.
            self.pool.join(self.settings.shutdown_grace_seconds + 5.0)
        if self.endpoints:
            self.endpoints.stop()
        log.info("stopped")

    def healthy(self) -> tuple[bool, list[str]]:
        now = time.monotonic()
        if self.stop_event.is_set():  # draining after SIGTERM: the loops end on purpose
            return True, []
        problems = [f"{loop.name} loop stalled" for loop in self.loops if loop.stalled(now)]
        if self.pool:
            dead = [t.name for t in self.pool.threads if not t.is_alive()]
            problems += [f"worker slot {name} died" for name in dead]
        return not problems, problems
