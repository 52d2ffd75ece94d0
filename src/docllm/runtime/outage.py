"""Backing-service outages: back off, and log one line per state change, not one per retry."""

from __future__ import annotations

import logging
from collections.abc import Callable

from docllm.domain.backoff import Backoff, jittered


class Outage:
    def __init__(
        self,
        what: str,
        logger: logging.Logger,
        base: float = 0.5,
        cap: float = 15.0,
        draw: Callable[[], float] | None = None,
    ):
        """``draw`` (a draw from [0, 1)): each wait less up to half of it, so that the processes
        an outage stopped together do not all try again in the same instant (issue 44)."""
        self.what, self.logger, self.draw = what, logger, draw
        self.backoff = Backoff(base, cap)

    @property
    def down(self) -> bool:
        return self.backoff.failures > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns how long to wait before the next try."""
        if self.backoff.failures == 0:
            self.logger.warning("%s unavailable, backing off: %s", self.what, exc)
        delay = self.backoff.next()
        return jittered(delay, 0.5, self.draw()) if self.draw is not None else delay

    def ok(self) -> None:
        if self.backoff.failures:
            self.logger.warning("%s reachable again after %d failed tries", self.what, self.backoff.failures)
        self.backoff.reset()
