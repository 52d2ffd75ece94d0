"""This process in the worker registry (``docllm workers``, the dashboard): its record is beaten
every few seconds with a TTL of three periods, and removed at a clean stop, so a killed process
disappears when its TTL runs out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from docllm import __version__
from docllm.domain.errors import Unavailable
from docllm.domain.tasks.ports import Clock, WorkerRegistry
from docllm.domain.tasks.workers import InFlight, WorkerRecord
from docllm.runtime.port_calls import PortCalls
from docllm.runtime.waiting import sleep_unless
from docllm.runtime.worker import Worker

log = logging.getLogger("docllm.presence")

TTL_PERIODS = 3


def beat_seconds(lease_seconds: float) -> float:
    """A heartbeat's period (lease / 3), at most 5 s: the list of workers stays fresh."""
    return min(5.0, lease_seconds / 3.0)


class Presence:
    def __init__(
        self, registry: WorkerRegistry, clock: Clock, calls: PortCalls, worker: Worker, worker_id: str, period: float
    ):
        self.registry, self.clock, self.calls, self.worker = registry, clock, calls, worker
        self.worker_id, self.period = worker_id, period
        self.ttl_ms = int(period * TTL_PERIODS * 1000)
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.started_at: float | None = None

    async def run(self, done: asyncio.Event) -> None:
        """Beat until ``done`` is set (the service sets it once the worker has drained), then leave.
        No beat is in flight when it leaves: a late one would bring the record back."""
        while not done.is_set():
            flights = [
                (r.attempt.task_id, r.attempt.number, r.attempt.started_ms) for r in self.worker.running.values()
            ]
            try:
                await self.calls.call(self._beat, flights)
            except Unavailable as exc:
                log.warning("worker registry beat failed: %s", exc)
            except Exception:  # a bug here must not stop the process
                log.exception("worker registry beat failed unexpectedly")
            await sleep_unless(done, self.period)
        try:
            await self.calls.call(self.registry.remove, self.worker_id)
        except Exception as exc:  # noqa: BLE001 - its TTL removes it anyway
            log.warning("could not remove this worker from the registry (%s); its TTL will", exc)

    def _beat(self, flights: list[tuple[int, int, int]]) -> None:
        now_ms = self.clock.now_ms()
        now = now_ms / 1000.0
        if self.started_at is None:
            self.started_at = now
        record = WorkerRecord(
            id=self.worker_id,
            host=self.host,
            pid=self.pid,
            version=__version__,
            slots=self.worker.concurrency,
            in_flight=tuple(InFlight(t, a, round(max(0, now_ms - since) / 1000.0, 3)) for t, a, since in flights),
            started_at=self.started_at,
            last_beat=now,
        )
        self.registry.beat(record, self.ttl_ms)
