"""The RateLimiter port in memory: one process's limits, the reference the Redis script is held to."""

from __future__ import annotations

import threading
from typing import Any

from docllm.domain.llm.rate_limits import LimitState, ProviderHints, correct, decide, headroom
from docllm.domain.tasks.ports import Clock


class _Shared:
    def __init__(self) -> None:
        self.state = LimitState()
        self.lock = threading.Lock()


class InMemoryRateLimiter:
    def __init__(self, clock: Clock, rpm: int | None = None, tpm: int | None = None):
        self._clock, self._rpm, self._tpm = clock, rpm or 0, tpm or 0
        self._shared = _Shared()

    def read_on(self, clock: Clock) -> InMemoryRateLimiter:
        """The same limits asked by a process whose reading of the authority's time is ``clock``'s."""
        other = InMemoryRateLimiter(clock, self._rpm, self._tpm)
        other._shared = self._shared
        return other

    def acquire(self, tokens: int) -> float:
        s = self._shared
        with s.lock:
            s.state, wait_ms = decide(s.state, self._clock.now_ms(), self._rpm, self._tpm, tokens)
        return wait_ms / 1000

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        s = self._shared
        with s.lock:
            s.state = correct(s.state, self._clock.now_ms(), self._tpm, delta_tokens, hints)

    def headroom(self) -> dict[str, Any]:
        s = self._shared
        with s.lock:
            return headroom(s.state, self._clock.now_ms(), self._rpm, self._tpm)
