"""What the peers' jobs write: the first start in a process (one ``SET NX``), or every start
(``RPUSH``, for the recovery runs). ``BENCH_MARK_URL`` names the Redis database."""

from __future__ import annotations

import os
import time

MARK_KEY = "bench:first_start"
_marked = False
_client = None


def _redis():
    global _client
    if _client is None:
        import redis

        _client = redis.Redis.from_url(os.environ["BENCH_MARK_URL"])
    return _client


def mark_first_start() -> None:
    """Once per process (RQ's fork worker runs each job in a fresh fork: once per job there)."""
    global _marked
    if not _marked:
        _marked = True
        _redis().set(MARK_KEY, repr(time.time()), nx=True)


def record_start(key: str) -> None:
    _redis().rpush(key, repr(time.time()))
