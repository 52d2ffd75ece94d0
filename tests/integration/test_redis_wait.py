"""DOCLLM_REDIS_WAIT_REPLICAS on a real Sentinel set: a claim and an ack return once the replica
has them (WAIT on the connection that wrote them), and what that costs."""

from __future__ import annotations

import os
import signal
import time

from docllm.adapters.redis.client import make_redis_client
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.tasks.payload import make_payload
from tests.servers import RedisClusterSet, SentinelSet

LEASE_MS = 30_000


def _cycles(queue: RedisTaskQueue, n: int) -> float:
    """Seconds per push + claim + ack."""
    start = time.perf_counter()
    for i in range(n):
        queue.push(make_payload(i + 1, "t"))
        delivery = queue.claim("w1", LEASE_MS)
        assert delivery is not None and queue.ack(delivery.token)
    return (time.perf_counter() - start) / n


def test_claims_and_acks_wait_for_a_replica(sentinel_set: SentinelSet, sentinel_url: str) -> None:
    client = make_redis_client(sentinel_url, "")
    plain, waiting = RedisTaskQueue(client, "nowait"), RedisTaskQueue(client, "wait", wait_replicas=1)
    replica = next(node for node in sentinel_set.data_nodes if node is not sentinel_set.primary())

    waiting.push(make_payload(1, "x"))
    held = waiting.claim("w1", LEASE_MS)
    assert held is not None
    with replica.client() as on_replica:
        assert on_replica.hlen(waiting.keys.leases) == 1  # there when claim returned

    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)  # the replica stops confirming
    try:
        started = time.monotonic()
        assert waiting.ack(held.token)  # still done: WAIT is best effort, 1 s at most
        waited = time.monotonic() - started
        started = time.monotonic()
        plain.push(make_payload(2, "y"))
        assert plain.claim("w1", LEASE_MS) is not None
        not_waited = time.monotonic() - started
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    assert waited >= 0.9 and not_waited < 0.8, (waited, not_waited)  # a WAIT would take 1 s

    sentinel_set.wait_healthy()
    cost = {name: _cycles(queue, 200) * 1000 for name, queue in (("no wait", plain), ("wait 1", waiting))}
    print(f"\nms per push + claim + ack: {cost}")
    client.close()


def test_on_a_cluster_the_wait_goes_to_the_queues_node(cluster_set: RedisClusterSet, cluster_url: str) -> None:
    client = make_redis_client(cluster_url, "")
    queue = RedisTaskQueue(client, "{wait}", wait_replicas=1)
    queue.push(make_payload(1, "x"))
    held = queue.claim("w1", LEASE_MS)
    assert held is not None and queue.ack(held.token)
    assert queue.stats().processing == 0
    client.close()
