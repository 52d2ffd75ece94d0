"""A store read shared by the scrapes of an interval: scrape-time gauges of the fleet's figures
(lanes, batches) cost the database at most one read per ``every_s`` per process."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger("docllm.metrics")

T = TypeVar("T")


class ThrottledRead(Generic[T]):
    """``read()`` at most once per ``every_s`` of ``clock`` (monotonic seconds: a record of when,
    never a decision about a task); None while the store is down (no gauges, not an error)."""

    def __init__(self, read: Callable[[], T], what: str, every_s: float, clock: Callable[[], float] = time.monotonic):
        self.read, self.what, self.every_s, self.clock = read, what, every_s, clock
        self._value: T | None = None
        self._read_at = 0.0

    def __call__(self) -> T | None:
        now = self.clock()
        if self._value is None or now - self._read_at >= self.every_s:
            try:
                self._value, self._read_at = self.read(), now
            except Exception as exc:  # noqa: BLE001 - the database down: none of these gauges this scrape
                log.debug("%s unavailable: %s", self.what, exc)
                self._value = None
        return self._value
