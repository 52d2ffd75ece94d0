"""The BatchLeases contract: batch_lease.lua on fakeredis, a real Redis and a Cluster, on a ManualClock.

One poller at a time per batch; a lease that runs out on the authority clock lets another take it;
a stale token can neither renew nor release (issue 28, Life of a batch, 4). The member tasks'
leases are renewed by the queue's own renewal, in one call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
import redis

from docllm.adapters.redis.batch_leases import RedisBatchLeases
from docllm.adapters.redis.client import make_redis_client
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.batches.ports import BatchLeases
from sim.manual_clock import ManualClock
from tests.support.memory.batch_leases import in_memory_batch_leases
from tests.support.memory.queue import InMemoryTaskQueue

TTL = 60_000  # long in real time too: the real server's key TTL must never decide before the clock does
REF, OTHER = "a" * 32, "b" * 32


@dataclass
class LeasesUnderTest:
    leases: BatchLeases
    queue: RedisTaskQueue  # whose task leases the batch's members hold
    clock: ManualClock


REAL = ("redis", "cluster")  # a Cluster: the lease's key and the queue's share one slot (the hash tag)


@pytest.fixture(params=["memory", "fakeredis", *(pytest.param(name, marks=pytest.mark.redis_server) for name in REAL)])
def subject(request: pytest.FixtureRequest) -> Iterator[LeasesUnderTest]:
    clock = ManualClock()
    if request.param == "memory":  # what unit tests use: the adapter on the in-memory queue's fakeredis
        memory = InMemoryTaskQueue(clock)
        yield LeasesUnderTest(in_memory_batch_leases(memory, clock), memory, clock)
        return
    if request.param == "fakeredis":
        client: Any = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    elif request.param == "redis":
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    else:  # the production client of a Cluster
        client = make_redis_client(request.getfixturevalue("cluster_url"), "")
    queue = RedisTaskQueue(client, "{docllm}", clock=clock)
    yield LeasesUnderTest(RedisBatchLeases(client, queue.keys, clock, queue), queue, clock)
    client.close()


def test_adapter_has_every_method_of_the_port(subject):
    wanted = {name for name in vars(BatchLeases) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(subject.leases, name, None))} == set()


def test_the_lease_key_is_under_the_queues_prefix(subject):
    assert subject.queue.keys.batch_lease(REF) == f"{subject.queue.keys.prefix}:batch:lease:{REF}"


def test_one_holder_at_a_time(subject):
    first = subject.leases.acquire(REF, "w-1", TTL)
    assert first is not None
    assert subject.leases.acquire(REF, "w-2", TTL) is None
    assert subject.leases.acquire(REF, "w-1", TTL) is None  # the same owner too: a token is one holding
    assert subject.leases.renew(REF, first, TTL)
    assert subject.leases.acquire(OTHER, "w-2", TTL) is not None  # another batch is another lease


def test_a_renewed_lease_lasts_from_the_renewal(subject):
    token = subject.leases.acquire(REF, "w-1", TTL)
    subject.clock.advance(TTL - 1000)
    assert subject.leases.renew(REF, token, TTL)
    subject.clock.advance(TTL - 1000)  # past the first deadline, within the renewed one
    assert subject.leases.acquire(REF, "w-2", TTL) is None
    assert subject.leases.renew(REF, token, TTL)


def test_expiry_lets_another_acquire_and_the_stale_token_can_do_nothing(subject):
    stale = subject.leases.acquire(REF, "w-1", TTL)
    subject.clock.advance(TTL + 1)
    fresh = subject.leases.acquire(REF, "w-2", TTL)
    assert fresh is not None and fresh != stale
    assert not subject.leases.renew(REF, stale, TTL)
    assert not subject.leases.release(REF, stale)
    assert subject.leases.acquire(REF, "w-3", TTL) is None  # the stale release freed nothing
    assert subject.leases.renew(REF, fresh, TTL)


def test_an_expired_token_cannot_renew_even_when_nobody_took_it(subject):
    token = subject.leases.acquire(REF, "w-1", TTL)
    subject.clock.advance(TTL + 1)
    assert not subject.leases.renew(REF, token, TTL)  # it polls again only by acquiring
    assert subject.leases.acquire(REF, "w-1", TTL) is not None


def test_release_frees_it_at_once_and_only_for_its_holder(subject):
    token = subject.leases.acquire(REF, "w-1", TTL)
    assert not subject.leases.release(REF, "not-the-token")
    assert subject.leases.acquire(REF, "w-2", TTL) is None
    assert subject.leases.release(REF, token)
    assert not subject.leases.release(REF, token)  # twice: the second finds nothing
    assert not subject.leases.renew(REF, token, TTL)
    assert subject.leases.acquire(REF, "w-2", TTL) is not None


def test_renew_tasks_renews_the_members_leases_in_one_call(subject):
    lease_ms = 10_000
    for task_id in (1, 2, 3):
        subject.queue.push(f'{{"task_id": {task_id}}}')
    tokens = [d.token for d in subject.queue.claim_batch("batcher", lease_ms, 3)]
    assert subject.queue.ack(tokens[2])  # a member already done: its lease is gone
    subject.clock.advance(lease_ms - 1000)
    assert subject.leases.renew_tasks([*tokens, "no-such-lease"], lease_ms) == [True, True, False, False]
    subject.clock.advance(lease_ms - 1000)  # past the claim's deadline, within the renewal
    assert subject.queue.expired(10) == []
    subject.clock.advance(2000)
    assert {d.token for d in subject.queue.expired(10)} == set(tokens[:2])
    assert subject.leases.renew_tasks(tokens[:2], lease_ms) == [False, False]  # expired: the reaper's now
    assert subject.leases.renew_tasks([], lease_ms) == []
