"""The authority clock (DESIGN section 6): the Redis server's TIME, advanced locally by a
monotonic clock and re-read now and then. Never the worker's wall clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.topology import recover, server_time
from docllm.domain.tasks.policies import LeasePolicy

log = logging.getLogger("docllm.clock")

# (new_ms, old_ms, since_ms, lease_ms): TaskQueue.note_clock_step
StepReport = Callable[[int, int, int, int], Any]


class RedisServerClock:
    """Milliseconds of the Redis server's clock, at one ``TIME`` call per ``resync_seconds``.

    Between reads the last server time is advanced by ``monotonic`` (so a jump of the local wall
    clock changes nothing). The read is stamped with the middle of its round trip.

    A read that disagrees with the monotonic clock by more than a quarter of ``lease_ms`` is a
    step of the server's clock (an NTP step, a VM resume, a failover to another host). It is
    reported to the fleet (``watch_steps``: the queue records it in Redis) before this clock hands
    out the new time, so that no process reclaims leases across the step before every live worker
    could renew them on the new clock.

    A verdict on a lease ("expired", "too far out", "may be renewed") reads ``TIME`` afresh
    (``fresh_ms``, ``verdict_ms``): a reading taken before a step this clock has not seen yet
    would judge a deadline written on the new clock with the old one. And a verdict that a lease
    is expired or too far out waits until this clock has read the server for half a lease
    (``verdict_ms``): its first reading has nothing before it to be checked against, so a step
    just before it is seen only by the processes that read the clock earlier; each worker that
    holds a lease re-reads it at its next heartbeat (a third of a lease) and reports the step.
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        resync_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        lease_ms: int = LeasePolicy().lease_ms,
        key: str = "docllm:queue:ready",
    ):
        self._client = client
        self._key = key
        self._resync_seconds = resync_seconds
        self._monotonic = monotonic
        self._lease_ms = lease_ms
        self._lock = threading.Lock()
        self._server_ms: int | None = None
        self._read_at = 0.0
        self._report: StepReport | None = None
        self._pending: tuple[int, int, int, int] | None = None  # a step not yet recorded in Redis
        self._first_read_at: float | None = None
        # A third of a lease for every lease holder's next heartbeat, a sixth for a late one.
        self._verdict_wait_seconds = lease_ms / 2000
        self.steps = 0

    def watch_steps(self, report: StepReport) -> None:
        self._report = report

    def now_ms(self) -> int:
        with self._lock:
            if self._server_ms is None or self._monotonic() - self._read_at >= self._resync_seconds:
                self._read_server_time()
            return self._handed_out()

    def fresh_ms(self) -> int:
        """The server's time read now, for a verdict on a process's own leases (renewable or not)."""
        with self._lock:
            self._read_server_time()
            return self._handed_out()

    def verdict_ms(self) -> int | None:
        """The server's time read now, for a verdict on other processes' leases (expired, too far
        out); None while this clock has read the server for less than half a lease."""
        with self._lock:
            self._read_server_time()
            now = self._handed_out()
            assert self._first_read_at is not None
            return now if self._monotonic() - self._first_read_at >= self._verdict_wait_seconds else None

    def _handed_out(self) -> int:
        if self._pending is not None and self._report is not None:
            self._report(*self._pending)  # raises while Redis is unreachable: no new time yet
            self._pending = None
        assert self._server_ms is not None
        return self._server_ms + int((self._monotonic() - self._read_at) * 1000)

    def _read_server_time(self) -> None:
        sent = self._monotonic()
        with redis_errors("TIME", lambda exc: recover(self._client, exc)):
            seconds, micros = server_time(self._client, self._key)
        received = self._monotonic()
        server_ms = int(seconds) * 1000 + int(micros) // 1000
        read_at = (sent + received) / 2
        if self._server_ms is not None:
            expected = self._server_ms + int((read_at - self._read_at) * 1000)
            self._check_step(server_ms, expected, int((read_at - self._read_at) * 1000))
        else:
            self._first_read_at = read_at
        self._server_ms, self._read_at = server_ms, read_at

    def _check_step(self, server_ms: int, expected: int, since_ms: int) -> None:
        jump = server_ms - expected
        if abs(jump) <= self._lease_ms // 4:
            return
        self.steps += 1
        way = "forward" if jump > 0 else "back"
        log.warning("the Redis server's clock stepped %s by %.1f s", way, abs(jump) / 1000)
        self._pending = (server_ms, expected, since_ms, self._lease_ms)
