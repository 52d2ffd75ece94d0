"""A loop that runs one service step every interval (the reaper, the reconciler)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from docllm.domain.errors import Unavailable
from docllm.runtime.outage import Outage
from docllm.runtime.port_calls import PortCalls
from docllm.runtime.waiting import sleep_unless


class PeriodicLoop:
    """Runs ``step`` (a blocking port call) every ``interval`` seconds until ``stop`` is set;
    ``step`` returning True (more work waiting) runs it again at once. ``last_beat`` (event-loop
    time) feeds the health check."""

    def __init__(
        self,
        name: str,
        step: Callable[[], bool],
        interval: float,
        calls: PortCalls,
        logger: logging.Logger,
        on_cycle: Callable[[float], None] | None = None,
    ):
        self.name, self.step, self.interval, self.calls, self.logger = name, step, interval, calls, logger
        self.on_cycle = on_cycle
        self.outage = Outage(name, logger)
        self.last_beat: float | None = None

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            self.last_beat = loop.time()
            started = time.perf_counter()
            wait = self.interval
            try:
                if await self.calls.call(self.step):
                    wait = 0.0
                self.outage.ok()
            except Unavailable as exc:
                wait = max(wait, self.outage.failed(exc))
            except Exception:
                self.logger.exception("%s cycle failed; next try in %.1fs", self.name, self.interval)
            if self.on_cycle:
                self.on_cycle(time.perf_counter() - started)
            await sleep_unless(stop, wait)

    def stalled(self, now: float) -> bool:
        """A loop that has not come round for several intervals is stuck (``now``: loop time)."""
        return self.last_beat is not None and now - self.last_beat > max(30.0, 5 * self.interval)
