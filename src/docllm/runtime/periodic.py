"""A background loop that runs one service step every interval (the reaper, the reconciler)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from docllm.domain.errors import Unavailable
from docllm.runtime.outage import Outage


class PeriodicLoop:
    """Runs ``step`` every ``interval`` seconds until ``stop`` is set; ``step`` returning True
    (more work waiting) runs it again at once. ``last_beat`` feeds the health check."""

    def __init__(self, name: str, step: Callable[[], bool], interval: float, stop: threading.Event,
                 logger: logging.Logger, on_cycle: Callable[[float], None] | None = None):
        self.name, self.step, self.interval, self.stop, self.logger = name, step, interval, stop, logger
        self.on_cycle = on_cycle
        self.outage = Outage(name, logger)
        self.last_beat = time.monotonic()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> PeriodicLoop:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            self.last_beat = time.monotonic()
            started = time.perf_counter()
            wait = self.interval
            try:
                more = self.step()
                self.outage.ok()
                if more:
                    wait = 0.0
            except Unavailable as exc:
                wait = max(wait, self.outage.failed(exc))
            except Exception:
                self.logger.exception("%s cycle failed; next try in %.1fs", self.name, self.interval)
            if self.on_cycle:
                self.on_cycle(time.perf_counter() - started)
            self.stop.wait(wait)

    def stalled(self, now: float | None = None) -> bool:
        """A loop that has not come round for several intervals is stuck (or dead)."""
        now = time.monotonic() if now is None else now
        return not self.thread.is_alive() or now - self.last_beat > max(30.0, 5 * self.interval)
