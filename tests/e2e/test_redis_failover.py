"""Redis failovers under running fleets (DESIGN section 10, issue 15): documents flow through two
worker processes while the primary that holds the queue is SIGKILLed; a replica takes over and the
fleet follows it by itself. Every task ends ``success``, committed exactly once (audit trigger),
and no lease that was still valid is lost: the lease (15 s) is at least 2 x the failover the
settings announce (5 s) + 5 s, so no task is reclaimed or abandoned.

1. Sentinel (primary, replica, three sentinels, down-after 1 s): the replica is promoted, the old
   primary restarts and comes back as the new primary's replica.
2. Cluster (three primaries with a replica each, node-timeout 1 s): the primary that owns the
   queue's slot dies, its replica takes over; the old primary restarts as its replica.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, commits, install_commit_audit, product_env, wait_until, write_documents
from tests.servers import MariaDBServer, RedisClusterSet, RedisServer, SentinelSet

pytestmark = pytest.mark.e2e

DOCUMENTS = 8
RIDE_THROUGH = {
    "DOCLLM_LEASE_SECONDS": "15",
    "DOCLLM_REDIS_FAILOVER_SECONDS": "5",  # measured: 2-4 s here (printed below)
    "DOCLLM_OFFLINE_LATENCY_SECONDS": "2",  # the failover hits attempts mid-way
    "DOCLLM_CONCURRENCY": "2",
}


def _run_through_a_failover(
    tmp_path: Path,
    redis_url: str,
    mysql_url: str,
    prefix: str,
    kill: Callable[[], RedisServer],
    failed_over: Callable[[RedisServer], bool],
    after: Callable[[RedisServer], Callable[[], bool]],
) -> dict[str, float]:
    harness = Harness(tmp_path, product_env(redis_url, mysql_url, prefix, tmp_path / "home", **RIDE_THROUGH))
    probe = Probe(redis_url, mysql_url, prefix)
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        harness.init_db()
        install_commit_audit(probe)
        write_documents(tmp_path / "docs", DOCUMENTS, "failover")
        created = harness.submit(sorted((tmp_path / "docs").iterdir()))
        ids = {c["task_id"] for c in created}
        seconds["setup"] = time.monotonic() - t0
        harness.worker("w1")
        harness.worker("w2")
        wait_until(lambda: probe.counts()["success"] >= 1, 60, "a task done", on_timeout=harness.dump)

        seconds["first_done"] = time.monotonic() - t0
        victim = kill()
        killed = time.monotonic()
        wait_until(lambda: failed_over(victim), 60, "the replica to take over", interval=0.05)
        seconds["failover"] = time.monotonic() - killed
        rejoined = after(victim)  # checked while the tasks finish

        wait_until(lambda: probe.counts()["success"] == DOCUMENTS, 90, "every task done", on_timeout=harness.dump)
        seconds["all_done"] = time.monotonic() - killed
        wait_until(rejoined, 60, "the old primary to come back as a replica")
        seconds["rejoined"] = time.monotonic() - killed
        assert {tid: probe.rows(False)[tid]["status"] for tid in ids} == dict.fromkeys(ids, "success")
        assert commits(probe) == {tid: [1] for tid in ids}  # each once, by its first attempt
        # Still-valid leases rode through: nothing reclaimed by a reaper, nothing abandoned.
        assert harness.events("reclaimed", "abandoned", "lease_lost") == [], harness.dump()
        assert all(proc.alive for proc in harness.procs.values()), harness.dump()
        sizes = probe.queue_sizes()
        assert sizes == dict.fromkeys(sizes, 0), sizes  # Redis ends empty: nothing left in flight
        seconds["checked"] = time.monotonic() - t0
        return seconds
    finally:
        harness.close()
        probe.close()


def _sentinel_run(sentinel_set: SentinelSet, url: str, mysql_url: str, tmp_path: Path) -> dict[str, float]:
    old = sentinel_set.primary()

    def kill() -> RedisServer:
        old.kill()
        return old

    def promoted(victim: RedisServer) -> bool:
        return sentinel_set.primary() is not victim

    def rejoins(victim: RedisServer) -> Callable[[], bool]:
        victim.start()  # as a primary with its AOF; the sentinels turn it into a replica (about 10 s)
        new = sentinel_set.primary()

        def follows() -> bool:
            with victim.client(socket_timeout=1) as client:
                return client.info("replication").get("master_port") == new.port

        return follows

    return _run_through_a_failover(tmp_path, url, mysql_url, f"e2e-{uuid.uuid4().hex[:8]}", kill, promoted, rejoins)


def _cluster_run(cluster_set: RedisClusterSet, url: str, mysql_url: str, tmp_path: Path) -> dict[str, float]:
    prefix = "{e2e-" + uuid.uuid4().hex[:8] + "}"
    ready = prefix + ":queue:ready"
    owner = cluster_set.owner_of(ready)

    def kill() -> RedisServer:
        owner.kill()
        return owner

    def replica_took_over(victim: RedisServer) -> bool:
        return cluster_set.owner_of(ready) is not victim

    def rejoins(victim: RedisServer) -> Callable[[], bool]:
        victim.start()  # it rejoins as the replica of the node that took its place

        def follows() -> bool:
            with victim.client(socket_timeout=1) as client:
                return client.info("replication").get("role") == "slave"

        return follows

    return _run_through_a_failover(tmp_path, url, mysql_url, prefix, kill, replica_took_over, rejoins)


def test_sentinel_and_cluster_failovers_mid_run(
    sentinel_set: SentinelSet,
    sentinel_url: str,
    cluster_set: RedisClusterSet,
    cluster_url: str,
    mysql_url: str,
    mariadb_server: MariaDBServer,
    tmp_path: Path,
) -> None:
    """Both at once, each with its own fleet and database (the suite's time budget)."""
    second_db = f"t_cluster_failover_{uuid.uuid4().hex[:12]}"
    cluster_mysql_url = mariadb_server.create_database(second_db)
    try:
        with ThreadPoolExecutor(2) as pool:
            sentinel = pool.submit(_sentinel_run, sentinel_set, sentinel_url, mysql_url, tmp_path / "sentinel")
            cluster = pool.submit(_cluster_run, cluster_set, cluster_url, cluster_mysql_url, tmp_path / "cluster")
            print(f"\nsentinel failover seconds: {sentinel.result()}\ncluster failover seconds: {cluster.result()}")
    finally:
        mariadb_server.drop_database(second_db)
