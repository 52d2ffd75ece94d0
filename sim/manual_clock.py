"""A clock that only moves when told to: for tests, fakes and the simulation."""

from __future__ import annotations

import threading


class ManualClock:
    """Authority time in ms that advances only through ``advance``/``set``."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = int(start_ms)
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: float) -> int:
        with self._lock:
            self._now += int(ms)
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = int(now_ms)
