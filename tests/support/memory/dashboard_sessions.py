"""DashboardSessions in memory: one process's sessions (unit tests), held to the Redis adapter by
``tests/contract/test_dashboard_sessions_contract.py``."""

from __future__ import annotations

import secrets
import threading
from collections import Counter

from docllm.adapters.redis.dashboard_sessions import KEY_BYTES, WINDOW_MS
from docllm.domain.tasks.ports import Clock


class InMemoryDashboardSessions:
    def __init__(self, clock: Clock, window_ms: int = WINDOW_MS):
        self._clock, self.window_ms = clock, window_ms
        self._key, self._generation = secrets.token_bytes(KEY_BYTES), secrets.token_hex(16)
        self._failures: Counter[tuple[int, str]] = Counter()
        self._lock = threading.Lock()

    def current(self) -> tuple[bytes, str]:
        with self._lock:
            return self._key, self._generation

    def end_all(self) -> str:
        with self._lock:
            self._generation = secrets.token_hex(16)
            return self._generation

    def failures(self, client: str) -> int:
        with self._lock:
            return self._failures[(self._clock.now_ms() // self.window_ms, client)]

    def fail(self, client: str) -> int:
        window = self._clock.now_ms() // self.window_ms
        with self._lock:
            for old in [k for k in self._failures if k[0] < window]:
                del self._failures[old]
            self._failures[(window, client)] += 1
            return self._failures[(window, client)]
