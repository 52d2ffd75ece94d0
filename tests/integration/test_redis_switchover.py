"""Planned switch-overs on real servers (ARCHITECTURE.md, Topologies): the old primary stays up as a replica,
so connections to it stay open and answer READONLY (Sentinel) or MOVED (Cluster). The queue's
client must find the new primary by itself within seconds, not retry the old one forever."""

from __future__ import annotations

import time
from typing import Any

from docllm.adapters.redis.client import make_redis_client
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.errors import Unavailable
from docllm.domain.tasks.payload import make_payload
from tests.servers import RedisClusterSet, SentinelSet
from tests.servers.redis_topologies import MASTER_NAME, wait_for

LEASE_MS = 30_000


def _serves_again(queue: RedisTaskQueue, task_id: int, timeout: float = 30.0) -> tuple[float, int]:
    """Push and claim until both work; returns the seconds it took and the Unavailable seen."""
    start, failures = time.monotonic(), 0
    while time.monotonic() - start < timeout:
        try:
            queue.push(make_payload(task_id, "after"))
            delivery = queue.claim("w1", LEASE_MS)
            assert delivery is not None and queue.ack(delivery.token)
            return time.monotonic() - start, failures
        except Unavailable:
            failures += 1
            time.sleep(0.1)
    raise AssertionError(f"the queue did not follow the new primary within {timeout}s ({failures} failures)")


def test_sentinel_switchover_is_followed(sentinel_set: SentinelSet, sentinel_url: str) -> None:
    client = make_redis_client(sentinel_url, "")
    queue = RedisTaskQueue(client, "switch")
    queue.push(make_payload(1, "before"))
    held = queue.claim("w1", LEASE_MS)  # pooled connections to the old primary, kept open
    old = sentinel_set.primary()
    with sentinel_set.sentinel_client() as sentinel:
        sentinel.execute_command("SENTINEL FAILOVER", MASTER_NAME)
    wait_for("a new primary", lambda: sentinel_set.primary() is not old, 30)
    # Until the sentinels turn the old primary into a replica it still takes writes (and loses
    # them: I10, ARCHITECTURE.md). From then on our open connections to it answer READONLY.
    wait_for("the old primary to be a replica", lambda: old.client().info("replication")["role"] == "slave", 30)
    took, failures = _serves_again(queue, 2)
    assert held is not None and queue.extend(held.token, LEASE_MS)  # the lease was replicated: still valid
    pool: Any = client.connection_pool  # type: ignore[union-attr]  # a Sentinel client: a SentinelConnectionPool
    assert pool.proxy.master_address[1] == sentinel_set.primary().port != old.port
    print(f"\nsentinel switch-over followed in {took:.2f}s after {failures} Unavailable")
    client.close()


def test_cluster_switchover_is_followed(cluster_set: RedisClusterSet, cluster_url: str) -> None:
    client = make_redis_client(cluster_url, "")
    queue = RedisTaskQueue(client, "{switch}")
    queue.push(make_payload(1, "before"))
    held = queue.claim("w1", LEASE_MS)
    old = cluster_set.owner_of(queue.keys.ready)
    replica = next(n for n in cluster_set.nodes if n is not old and _follows(n, old.port))
    with replica.client() as admin:
        admin.execute_command("CLUSTER FAILOVER")  # the replica takes over, the old primary follows it
    wait_for("the replica to take over", lambda: cluster_set.owner_of(queue.keys.ready) is not old, 30)
    took, failures = _serves_again(queue, 2)
    assert held is not None and queue.extend(held.token, LEASE_MS)
    print(f"\ncluster switch-over followed in {took:.2f}s after {failures} Unavailable")
    client.close()


def _follows(node, primary_port: int) -> bool:
    with node.client() as client:
        return int(client.info("replication").get("master_port", 0)) == primary_port
