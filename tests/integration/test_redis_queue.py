"""RedisTaskQueue and RedisServerClock against a real redis-server: what only a real server shows
(script cache, AOF restarts, outages, cluster slots, round trips and command counts)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.queue import RedisTaskQueue, queue_scripts
from docllm.domain.errors import Unavailable
from docllm.domain.lanes.model import LanePolicy
from docllm.domain.tasks.payload import make_payload
from sim.manual_clock import ManualClock
from tests.servers import RedisServer

LEASE = 30_000


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url, socket_connect_timeout=2) as conn:
        yield conn


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def queue(client: redis.Redis, clock: ManualClock) -> RedisTaskQueue:
    return RedisTaskQueue(client, clock=clock)


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Commands the server executed since CONFIG RESETSTAT, inner script calls included."""
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()}
    return {name: n for name, n in calls.items() if name not in {"config", "info", "config|resetstat"}}


def test_default_keys_are_the_original_notes() -> None:
    keys = RedisKeys()
    assert (keys.ready, keys.processing, keys.processing_ts) == (
        "docllm:queue:ready",
        "docllm:queue:processing",
        "docllm:hash:processing_ts",
    )


def test_a_hash_tag_prefix_puts_every_key_in_one_slot(client: redis.Redis, clock: ManualClock) -> None:
    queue = RedisTaskQueue(client, "{docllm}", clock=clock)
    assert len({key_slot(key.encode()) for key in queue.keys.script_keys}) == 1
    queue.push(make_payload(1, "a"))
    queue.push(make_payload(2, "b"))
    delivery = queue.claim("w1", LEASE)
    assert delivery is not None and queue.retry_later(delivery.token, 1_000)
    queue.claim("w1", LEASE)
    queue.dead_letter(None, "junk", "bad")
    written = {key.decode() if isinstance(key, bytes) else key for key in client.keys("*")}
    k = queue.keys  # ready is empty again; staging is used by blocking claims only; no clock step, no cancel
    unused_lanes = set(k.lane_keys) - {k.lane_state}  # no other lane, no tenant: only the lanes' credit
    assert written == set(k.script_keys) - {k.ready, k.staging, k.staging_seen, k.clock, k.cancelled} - unused_lanes
    assert all(key.startswith("{docllm}:") for key in written)


def test_scripts_survive_script_flush(client: redis.Redis, queue: RedisTaskQueue) -> None:
    queue.push(make_payload(1, "a"))
    first = queue.claim("w1", LEASE)
    assert first is not None and queue.ack(first.token)
    client.script_flush()
    queue.push(make_payload(2, "b"))
    second = queue.claim("w1", LEASE)  # NOSCRIPT -> SCRIPT LOAD -> EVALSHA, inside redis-py
    assert second is not None and second.raw == make_payload(2, "b")
    assert queue.ack(second.token)


def test_a_restart_keeps_ready_and_leased_payloads(redis_server: RedisServer, redis_url: str) -> None:
    clock = ManualClock()
    with redis.Redis.from_url(redis_url) as before:
        queue = RedisTaskQueue(before, clock=clock)
        queue.push(make_payload(1, "a"))
        queue.push(make_payload(2, "b"))
        leased = queue.claim("w1", 1_000)
        assert leased is not None
    redis_server.restart()  # AOF replay
    with redis.Redis.from_url(redis_url) as after:
        queue = RedisTaskQueue(after, clock=clock)
        stats = queue.stats()
        assert (stats.ready, stats.processing) == (1, 1)
        clock.advance(1_001)
        assert queue.expired(10) == [leased]
        assert queue.requeue(leased.token)
        assert [getattr(queue.claim("w2", LEASE), "raw", None) for _ in range(2)] == [
            make_payload(2, "b"),
            make_payload(1, "a"),
        ]


def test_a_stopped_server_raises_unavailable_then_works_again(redis_server: RedisServer, redis_url: str) -> None:
    with redis.Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=1) as client:
        queue = RedisTaskQueue(client, clock=ManualClock())
        queue.push(make_payload(1, "a"))
        delivery = queue.claim("w1", LEASE)
        assert delivery is not None
        redis_server.stop()
        try:
            calls: list[Any] = [
                lambda: queue.push(make_payload(2, "b")),
                lambda: queue.claim("w1", LEASE),
                lambda: queue.stage(0.1),
                lambda: queue.extend_many([delivery.token], LEASE),
                lambda: queue.extend(delivery.token, LEASE),
                lambda: queue.ack(delivery.token),
                lambda: queue.expired(10),
                lambda: queue.referenced_task_ids(),
                lambda: queue.dead_letters(),
                lambda: queue.stats(),
                lambda: RedisServerClock(client).now_ms(),
            ]
            for call in calls:
                with pytest.raises(Unavailable):
                    call()
        finally:
            redis_server.start()
        assert queue.ack(delivery.token)  # nothing was half done: the lease is still there
        queue.push(make_payload(2, "b"))
        assert queue.claim("w1", LEASE) is not None


def test_a_non_utf8_payload_is_leased_and_dead_lettered_byte_for_byte(
    client: redis.Redis, queue: RedisTaskQueue
) -> None:
    raw = b'{"task_id": 1, "task_name": "\xff\xfe latin-1 \xe9"}'
    client.lpush(queue.keys.ready, raw)
    delivery = queue.claim("w1", LEASE)
    assert delivery is not None and delivery.raw.encode("utf-8", "surrogateescape") == raw
    assert client.lindex(queue.keys.processing, 0) == raw
    assert queue.dead_letter(delivery.token, delivery.raw, "not UTF-8")
    [letter] = queue.dead_letters()
    assert letter.raw.encode("utf-8", "surrogateescape") == raw
    # Bytes that are not UTF-8 name no task, to the scripts as to the parser (domain/tasks/payload.py):
    # real Redis's cjson used to read task 1 here, where fakeredis's and the parser read none.
    assert letter.task_id is None


def test_processing_list_and_timestamps_stay_compatible(client: redis.Redis, queue: RedisTaskQueue) -> None:
    queue.push(make_payload(7, "x"))
    delivery = queue.claim("w1", LEASE)
    assert delivery is not None
    assert client.lrange(queue.keys.processing, 0, -1) == [make_payload(7, "x").encode()]
    assert client.hgetall(queue.keys.processing_ts) == {b"7": str(delivery.claimed_at_ms // 1000).encode()}
    assert queue.ack(delivery.token)
    assert client.exists(queue.keys.processing, queue.keys.processing_ts) == 0


# -- cost -----------------------------------------------------------------------------------------


class CountingConnection(redis.Connection):
    """Records the name of every command sent: one command sent is one round trip here."""

    sent: list[str] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        CountingConnection.sent.append(str(args[0]).upper())
        super().send_command(*args, **kwargs)


def test_claim_and_ack_cost_two_round_trips(redis_server: RedisServer, redis_url: str, client: redis.Redis) -> None:
    pool = redis.ConnectionPool(host=redis_server.host, port=redis_server.port, connection_class=CountingConnection)
    with redis.Redis(connection_pool=pool) as counted:
        queue = RedisTaskQueue(counted, clock=ManualClock())
        for task_id in (1, 2):
            client.lpush(queue.keys.ready, make_payload(task_id, "x"))  # the producer's connection
        warm = queue.claim("w1", LEASE)  # first use loads the script: a one-off NOSCRIPT + SCRIPT LOAD
        assert warm is not None and queue.ack(warm.token)
        CountingConnection.sent.clear()
        delivery = queue.claim("w1", LEASE)
        assert delivery is not None and queue.ack(delivery.token)
        assert CountingConnection.sent == ["EVALSHA", "EVALSHA"]  # the original note's loop: 4


def test_an_idle_wait_costs_one_command(client: redis.Redis, queue: RedisTaskQueue) -> None:
    client.config_resetstat()
    started = time.monotonic()
    assert queue.stage(0.5) is None
    assert time.monotonic() - started >= 0.45
    assert command_calls(client) == {"blmove": 1}


def _reap_ten_among(client: redis.Redis, in_flight: int) -> dict[str, int]:
    """10 expired leases among ``in_flight`` live ones: what one expired() + 10 requeue() execute."""
    client.flushall()
    clock = ManualClock()
    queue = RedisTaskQueue(client, clock=clock)
    keys = queue.keys
    for task_id in range(1, 11):
        queue.push(make_payload(task_id, "expiring"))
    doomed = [queue.claim("crashed", 1_000) for _ in range(10)]
    claim = queue_scripts(client)["claim"]
    for start in range(0, in_flight, 10_000):
        ids = range(100 + start, 100 + min(in_flight, start + 10_000))
        client.lpush(keys.ready, *(make_payload(i, "live") for i in ids))
        with client.pipeline(transaction=False) as pipe:
            for i in ids:
                args: list[str | int] = [clock.now_ms(), 10**9, "busy", 0, LanePolicy().script_arg(), f"live-{i}"]
                claim(keys=keys.script_keys, args=args, client=pipe)
            pipe.execute()
    assert queue.stats().processing == in_flight + 10
    assert queue.expired(100) == [] and not queue.requeue("no-such-token")  # scripts loaded
    clock.advance(1_001)
    client.config_resetstat()
    expired = queue.expired(100)
    assert sorted(d.token for d in expired) == sorted(d.token for d in doomed if d is not None)
    assert all(queue.requeue(d.token) for d in expired)
    calls = command_calls(client)
    assert queue.stats().ready == 10
    return calls


def test_reaping_costs_the_same_with_100_000_leases_in_flight_as_with_1_000(client: redis.Redis) -> None:
    small = _reap_ten_among(client, 1_000)
    large = _reap_ten_among(client, 100_000)
    assert large == small
    assert small["evalsha"] == 11 and small["zcount"] == 1 and small["zrange"] == 1  # both O(log n + limit)
    assert sum(small.values()) < 100


# -- the authority clock --------------------------------------------------------------------------


class SteppedMonotonic:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def test_server_clock_is_the_servers_time(client: redis.Redis) -> None:
    clock = RedisServerClock(client)
    for _ in range(2):  # between two readings of the server's TIME, give or take half the round trip
        before = server_ms(client)  # the clock synced on (its midpoint): 0.5 s covers a busy machine's
        mine = clock.now_ms()
        assert before - 500 <= mine <= server_ms(client) + 500
        time.sleep(0.05)


def test_server_clock_reads_time_once_per_resync(client: redis.Redis) -> None:
    monotonic = SteppedMonotonic()
    clock = RedisServerClock(client, resync_seconds=30, monotonic=monotonic)
    client.config_resetstat()
    first = clock.now_ms()
    monotonic.now += 10
    assert clock.now_ms() == first + 10_000  # advanced locally, no TIME
    assert command_calls(client) == {"time": 1}
    monotonic.now += 20
    resynced = clock.now_ms()  # the server's time again, not first + 30 s
    assert command_calls(client) == {"time": 2}
    assert abs(resynced - server_ms(client)) < 200


# -- the reconciler's read: a page per cycle, whatever the queue holds (issue 13) ------------------


def test_a_page_of_the_reconcilers_scan_reads_about_limit_payloads(client: redis.Redis, queue: RedisTaskQueue) -> None:
    client.lpush(queue.keys.ready, *(make_payload(i, "x") for i in range(1, 5_001)))
    for _ in range(300):
        queue.claim("w", 60_000)  # 4 700 ready, 300 leased (a hash table, not a listpack)
    named: set[int] = set()
    cursor, pages = None, 0
    while True:
        client.config_resetstat()
        found, cursor = queue.referenced_page(cursor, 100)
        # 4, and one command for each of the other lanes' lists and tenant queues (5) when the
        # page reaches them (small or empty: one LRANGE or HSCAN each)
        assert len(found) <= 120 and sum(command_calls(client).values()) <= 4 + 5
        named, pages = named | found, pages + 1
        if cursor is None:
            break
    assert named == set(range(1, 5_001)) and pages >= 50
