"""Backing-service outages: back off, and log one line per state change, not one per retry."""

from __future__ import annotations

import logging
import threading


class Outage:
    def __init__(self, what: str, logger: logging.Logger, base: float = 0.5, cap: float = 15.0):
        self.what, self.logger, self.base, self.cap = what, logger, base, cap
        self._failures = 0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self._failures > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns how long to wait before the next try."""
        with self._lock:
            self._failures += 1
            if self._failures == 1:
                self.logger.warning("%s unavailable, backing off: %s", self.what, exc)
            return min(self.cap, self.base * 2 ** min(self._failures - 1, 10))

    def ok(self) -> None:
        with self._lock:
            if self._failures:
                self.logger.warning("%s reachable again after %d failed tries", self.what, self._failures)
            self._failures = 0
