"""The WorkerRegistry contract: in memory, Redis on fakeredis, Redis on a real server.

Expiry follows the authority clock (a ManualClock here); TTLs are long in real time, so the Redis
hash's own PEXPIRE never decides a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import fakeredis
import pytest
import redis

from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.registry import RedisWorkerRegistry
from docllm.domain.tasks.ports import WorkerRegistry
from docllm.domain.tasks.workers import InFlight, WorkerRecord
from sim.manual_clock import ManualClock
from tests.support.memory.registry import InMemoryWorkerRegistry

TTL = 60_000


@dataclass
class RegistryUnderTest:
    name: str
    registry: WorkerRegistry
    clock: ManualClock
    client: redis.Redis | None = None


REDIS_PARAMS = ["fakeredis", pytest.param("redis", marks=pytest.mark.redis_server)]


@pytest.fixture(params=["memory", *REDIS_PARAMS])
def subject(request: pytest.FixtureRequest) -> Iterator[RegistryUnderTest]:
    yield from _subject(request)


@pytest.fixture(params=REDIS_PARAMS)
def redis_subject(request: pytest.FixtureRequest) -> Iterator[RegistryUnderTest]:
    yield from _subject(request)


def _subject(request: pytest.FixtureRequest) -> Iterator[RegistryUnderTest]:
    clock = ManualClock()
    if request.param == "memory":
        yield RegistryUnderTest("memory", InMemoryWorkerRegistry(clock), clock)
        return
    if request.param == "fakeredis":
        client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    yield RegistryUnderTest(request.param, RedisWorkerRegistry(client, "{dq}", clock=clock), clock, client)
    client.close()


def record(worker_id: str = "host-a:101", at: float = 1_700_000_000.0, **changes: Any) -> WorkerRecord:
    flights = (InFlight(7, 2, 12.5), InFlight(9, 1, 0.25))
    return replace(WorkerRecord(worker_id, "host-a", 101, "0.1.0", 4, flights, at - 60, at), **changes)


def test_adapter_has_every_method_of_the_port(subject: RegistryUnderTest) -> None:
    wanted = {name for name in vars(WorkerRegistry) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(subject.registry, name, None))} == set()


def test_a_beaten_record_is_live_as_written(subject: RegistryUnderTest) -> None:
    assert subject.registry.live() == []
    subject.registry.beat(record(), TTL)
    assert subject.registry.live() == [record()]


def test_a_later_beat_replaces_the_record(subject: RegistryUnderTest) -> None:
    subject.registry.beat(record(), TTL)
    newer = record(at=1_700_000_005.0, in_flight=())
    subject.registry.beat(newer, TTL)
    assert subject.registry.live() == [newer]


def test_live_workers_come_ordered_by_id_with_any_id(subject: RegistryUnderTest) -> None:
    ids = ["worker-β:3", "host-a:101", "{other}:7"]
    for worker_id in ids:
        subject.registry.beat(record(worker_id), TTL)
    assert [r.id for r in subject.registry.live()] == sorted(ids)


def test_a_record_not_beaten_within_its_ttl_disappears(subject: RegistryUnderTest) -> None:
    subject.registry.beat(record("a"), TTL)
    subject.registry.beat(record("b"), TTL)
    subject.clock.advance(TTL - 1_000)
    subject.registry.beat(record("b"), TTL)  # b keeps beating, a was killed
    assert [r.id for r in subject.registry.live()] == ["a", "b"]
    subject.clock.advance(1_001)
    assert [r.id for r in subject.registry.live()] == ["b"]
    subject.clock.advance(TTL)
    assert subject.registry.live() == []


def test_remove_forgets_a_worker_at_once_and_is_idempotent(subject: RegistryUnderTest) -> None:
    subject.registry.beat(record("a"), TTL)
    subject.registry.beat(record("b"), TTL)
    subject.registry.remove("a")
    subject.registry.remove("a")
    subject.registry.remove("never-seen")
    assert [r.id for r in subject.registry.live()] == ["b"]


def test_times_and_ages_keep_their_fractions(subject: RegistryUnderTest) -> None:
    exact = record(at=1_796_301_920.421, started_at=1_796_301_912.405, in_flight=(InFlight(1, 1, 0.001),))
    subject.registry.beat(exact, TTL)
    assert subject.registry.live() == [exact]


def test_redis_keys_share_the_queue_hash_tag_and_readers_clean_the_index(redis_subject: RegistryUnderTest) -> None:
    subject = redis_subject
    assert subject.client is not None
    keys = RedisKeys("{dq}")
    subject.registry.beat(record("a"), TTL)
    subject.registry.beat(record("b"), TTL)
    assert 0 < subject.client.pttl(keys.worker("a")) <= TTL
    names = [key.decode() if isinstance(key, bytes) else key for key in subject.client.keys("*")]
    assert names and all(name.startswith("{dq}:") for name in names)
    subject.client.delete(keys.worker("b"))  # its hash expired by Redis's own clock first
    subject.clock.advance(TTL + 1)
    subject.registry.beat(record("c"), TTL)
    assert [r.id for r in subject.registry.live()] == ["c"]
    assert subject.client.zrange(keys.workers, 0, -1) == [b"c"]  # a and b left the index
