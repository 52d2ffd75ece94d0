"""The RateLimiter port in memory: one process's limits, the reference the Redis script is held to."""

from __future__ import annotations

import threading
from typing import Any

from docllm.domain.ports import Clock
from docllm.domain.rate_limits import LimitState, ProviderHints, correct, decide, headroom


class InMemoryRateLimiter:
    def __init__(self, clock: Clock, rpm: int | None = None, tpm: int | None = None):
        self._clock, self._rpm, self._tpm = clock, rpm or 0, tpm or 0
        self._state = LimitState()
        self._lock = threading.Lock()

    def acquire(self, tokens: int) -> float:
        with self._lock:
            self._state, wait_ms = decide(self._state, self._clock.now_ms(), self._rpm, self._tpm, tokens)
        return wait_ms / 1000

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        with self._lock:
            self._state = correct(self._state, self._clock.now_ms(), self._tpm, delta_tokens, hints)

    def headroom(self) -> dict[str, Any]:
        with self._lock:
            return headroom(self._state, self._clock.now_ms(), self._rpm, self._tpm)
