"""The few places where a Redis Cluster client differs from a one-server (or Sentinel) client,
and the clean-up after a failover (ARCHITECTURE.md, Topologies)."""

from __future__ import annotations

import logging
from typing import Any

import redis
from redis.cluster import RedisCluster

from docllm.adapters.redis.errors import reply_code

log = logging.getLogger(__name__)


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def node_for(client: Any, key: str) -> redis.Redis:
    """The one-server client that serves ``key``: the client itself, or on a Cluster the primary
    that owns the key's slot as the client last learnt it (a stale answer fails and is refreshed)."""
    if not is_cluster(client):
        return client
    return client.get_redis_connection(client.get_node_from_key(key))


def server_time(client: Any, key: str) -> tuple[int, int]:
    """``TIME`` of the server that holds ``key``: on a Cluster, the node of the queue's slot (another
    shard's clock may differ, and the queue's deadlines are that node's)."""
    if is_cluster(client):
        return client.time(target_nodes=client.get_node_from_key(key))
    return client.time()


def recover(client: Any, exc: BaseException) -> None:
    """After an error that means "not the primary (any more)" make the next command find the
    primary again instead of asking the same connection forever.

    - READONLY (a primary demoted to replica, the connection still open): redis-py's Sentinel
      connection drops itself when the reply parses as ReadOnlyError, not when a script's error
      arrives wrapped in a plain ResponseError; either way the idle connections of the pool are
      dropped here, and each new one asks the sentinels where the primary is.
    - On a Cluster, an error the client did not handle itself (a connection of ours to a node, a
      MOVED storm past its redirect budget): the slot map is read again.
    """
    code = reply_code(exc)
    try:
        if is_cluster(client):
            if code in ("READONLY", "MOVED", "ASK", "CLUSTERDOWN") or isinstance(
                exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.ClusterError)
            ):
                client.nodes_manager.initialize()
        elif code == "READONLY":
            client.connection_pool.disconnect(inuse_connections=False)
    except Exception as failed:  # noqa: BLE001 - best effort: the caller reports the first error
        log.debug("redis: re-resolving the primary failed: %r", failed)
