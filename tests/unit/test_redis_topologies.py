"""Sentinel and Cluster without servers (ARCHITECTURE.md, Topologies): URLs, the Cluster prefix rule, the
lease a failover needs, which errors mean "find the primary again" and what that does."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest
import redis
from redis.cluster import RedisCluster

from docllm.adapters.redis.client import make_redis_client
from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.errors import means_unavailable, redis_errors
from docllm.adapters.redis.topology import recover
from docllm.adapters.redis.urls import hash_tag, parse_redis_url
from docllm.domain.errors import Unavailable
from docllm.settings import Settings, SettingsError, lease_for_failover, redact_url

SENTINELS = "redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2"


def test_a_sentinel_url_names_sentinels_master_db_and_passwords() -> None:
    target = parse_redis_url(SENTINELS + "?sentinel_password=other")
    assert target.kind == "sentinel" and target.master_name == "mymaster" and target.db == 2
    assert target.nodes == (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380))
    assert (target.password, target.sentinel_password, target.ssl) == ("s3cret", "other", False)
    assert parse_redis_url(SENTINELS).sentinel_password == "s3cret"  # the same one unless told
    assert parse_redis_url("rediss+sentinel://h/m").ssl


def test_a_cluster_url_names_its_seed_nodes() -> None:
    target = parse_redis_url("rediss+cluster://:pw@a:7000,b")
    assert (target.kind, target.nodes, target.password, target.ssl) == (
        "cluster",
        (("a", 7000), ("b", 6379)),
        "pw",
        True,
    )


@pytest.mark.parametrize(
    "url",
    ["redis+sentinel://h:26379", "redis+sentinel://h/m/x", "redis+cluster://h/3", "redis+cluster:///", "http://h"],
)
def test_a_url_docllm_cannot_use_stops_at_start(url: str) -> None:
    with pytest.raises(SettingsError, match="DOCLLM_REDIS_URL"):
        Settings.from_env({"DOCLLM_REDIS_URL": url})


def test_a_cluster_prefix_without_a_hash_tag_is_refused_naming_the_ready_key() -> None:
    with pytest.raises(SettingsError, match=r"DOCLLM_QUEUE_PREFIX.*\{docllm\}:queue:ready"):
        Settings.from_env({"DOCLLM_REDIS_URL": "redis+cluster://h:7000"})
    Settings.from_env({"DOCLLM_REDIS_URL": "redis+cluster://h:7000", "DOCLLM_QUEUE_PREFIX": "{docllm}"})
    assert hash_tag("app:{q1}") == "q1" and hash_tag("{}x") is None and hash_tag("docllm") is None


def test_passwords_are_redacted_from_the_url_and_its_query() -> None:
    shown = redact_url(SENTINELS + "?sentinel_password=other")
    assert "s3cret" not in shown and "other" not in shown


def test_a_lease_shorter_than_the_failover_needs_is_warned_about_at_start() -> None:
    assert lease_for_failover(30) == 65 and lease_for_failover(0) == 0
    sentinel = {"DOCLLM_REDIS_URL": "redis+sentinel://h/m"}
    [warning] = Settings.from_env(sentinel).warnings()  # 30 s lease, 30 s default detection
    assert "DOCLLM_LEASE_SECONDS=30" in warning and "65" in warning
    assert Settings.from_env({**sentinel, "DOCLLM_LEASE_SECONDS": "65"}).warnings() == []
    assert Settings.from_env({**sentinel, "DOCLLM_REDIS_FAILOVER_SECONDS": "5"}).warnings() == []
    assert Settings.from_env({}).warnings() == []  # one server: no failover to ride through


def test_clients_of_each_topology_are_built_without_connecting() -> None:
    sentinel = make_redis_client(SENTINELS, "")
    assert isinstance(sentinel, redis.Redis)
    assert type(sentinel.connection_pool).__name__ == "SentinelConnectionPool"


WRAPPED_READONLY = redis.exceptions.ResponseError(
    "Error running script (call to f_1a2b): @user_script:9: -READONLY You can't write against a read only replica."
)


@pytest.mark.parametrize(
    "exc",
    [
        WRAPPED_READONLY,
        redis.exceptions.ResponseError("READONLY You can't write against a read only replica. script: 1a2b"),
        redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
        redis.exceptions.MovedError("3999 127.0.0.1:6381"),
        redis.exceptions.AskError("3999 127.0.0.1:6381"),
        redis.exceptions.ClusterError("TTL exhausted."),
        redis.exceptions.SlotNotCoveredError('Slot "3999" is not covered by the cluster.'),
        redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
    ],
)
def test_failover_errors_mean_unavailable(exc: Exception) -> None:
    assert means_unavailable(exc)
    with pytest.raises(Unavailable), redis_errors("claim"):
        raise exc


def test_a_wrapped_readonly_drops_the_idle_connections_so_they_ask_for_the_primary_again() -> None:
    client = MagicMock(spec=redis.Redis)
    client.connection_pool = MagicMock()
    with pytest.raises(Unavailable), redis_errors("claim", lambda exc: recover(client, exc)):
        raise WRAPPED_READONLY
    client.connection_pool.disconnect.assert_called_once_with(inuse_connections=False)
    client.reset_mock()
    recover(client, redis.exceptions.ResponseError("WRONGTYPE Operation against a key"))
    client.connection_pool.disconnect.assert_not_called()


def test_on_a_cluster_a_redirect_or_lost_node_reads_the_slot_map_again() -> None:
    cluster = MagicMock(spec=RedisCluster)
    cluster.nodes_manager = MagicMock()
    for exc in (redis.exceptions.MovedError("1 h:1"), redis.exceptions.ConnectionError("reset"), WRAPPED_READONLY):
        recover(cluster, exc)
    assert cluster.nodes_manager.initialize.call_count == 3


def test_on_a_cluster_time_comes_from_the_node_of_the_queues_slot() -> None:
    cluster = MagicMock(spec=RedisCluster)
    cluster.time.return_value = (1_700_000_000, 250_000)
    clock = RedisServerClock(cluster, key="{q}:queue:ready")
    assert clock.now_ms() // 1000 == 1_700_000_000
    cluster.get_node_from_key.assert_called_with("{q}:queue:ready")
    assert cluster.time.call_args.kwargs == {"target_nodes": cluster.get_node_from_key.return_value}
