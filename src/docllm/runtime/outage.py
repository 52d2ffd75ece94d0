"""Backing-service outages: back off, and log one line per state change, not one per retry."""

from __future__ import annotations

import logging

from docllm.domain.backoff import Backoff


class Outage:
    def __init__(self, what: str, logger: logging.Logger, base: float = 0.5, cap: float = 15.0):
        self.what, self.logger = what, logger
        self.backoff = Backoff(base, cap)

    @property
    def down(self) -> bool:
        return self.backoff.failures > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns how long to wait before the next try."""
        if self.backoff.failures == 0:
            self.logger.warning("%s unavailable, backing off: %s", self.what, exc)
        return self.backoff.next()

    def ok(self) -> None:
        if self.backoff.failures:
            self.logger.warning("%s reachable again after %d failed tries", self.what, self.backoff.failures)
        self.backoff.reset()
