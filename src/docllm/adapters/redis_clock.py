"""The authority clock (DESIGN section 6): the Redis server's TIME, advanced locally by a
monotonic clock and re-read now and then. Never the worker's wall clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis
from redis.cluster import RedisCluster

from docllm.adapters.redis_errors import redis_errors
from docllm.adapters.redis_topology import recover, server_time


class RedisServerClock:
    """Milliseconds of the Redis server's clock, at one ``TIME`` call per ``resync_seconds``.

    Between reads the last server time is advanced by ``monotonic`` (so a jump of the local wall
    clock changes nothing). The read is stamped with the middle of its round trip.
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        resync_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        key: str = "docllm:queue:ready",
    ):
        self._client = client
        self._key = key
        self._resync_seconds = resync_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._server_ms: int | None = None
        self._read_at = 0.0

    def now_ms(self) -> int:
        with self._lock:
            if self._server_ms is None or self._monotonic() - self._read_at >= self._resync_seconds:
                self._read_server_time()
            assert self._server_ms is not None
            return self._server_ms + int((self._monotonic() - self._read_at) * 1000)

    def _read_server_time(self) -> None:
        sent = self._monotonic()
        with redis_errors("TIME", lambda exc: recover(self._client, exc)):
            seconds, micros = server_time(self._client, self._key)
        received = self._monotonic()
        self._server_ms = int(seconds) * 1000 + int(micros) // 1000
        self._read_at = (sent + received) / 2
