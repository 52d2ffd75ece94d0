"""Queue adapters under the contract tests: the unit tests' queue (the adapter on fakeredis with a
blocking stage), Redis on fakeredis, Redis on a real server,
under Sentinel (primary, replica, three sentinels) and as a Cluster (three primaries, three replicas).

Every adapter runs on a ManualClock, so expiry and delays are decided by the test alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
import redis

from docllm.adapters.redis.client import make_redis_client
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.tasks.ports import TaskQueue
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue


@dataclass
class QueueUnderTest:
    name: str
    queue: TaskQueue
    clock: ManualClock
    lpush: Callable[[str], object]  # what an existing producer does: a plain LPUSH onto ready
    # What the original note's worker does: BRPOPLPUSH ready processing (no lease), then HSET
    # processing_ts task_id stamp when a stamp is given; and that HSET alone.
    original_take: Callable[[str | None], str | None]
    original_stamp: Callable[[int, str], None]


REAL = ("redis", "sentinel", "cluster")


@pytest.fixture(params=["memory", "fakeredis", *(pytest.param(name, marks=pytest.mark.redis_server) for name in REAL)])
def subject(request: pytest.FixtureRequest) -> Iterator[QueueUnderTest]:
    clock = ManualClock()
    if request.param == "memory":
        memory = InMemoryTaskQueue(clock)
        yield QueueUnderTest(request.param, memory, clock, memory.push, memory.original_take, memory.original_stamp)
        return
    prefix = "docllm"
    if request.param == "fakeredis":
        client: Any = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    elif request.param == "redis":
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"), socket_timeout=0.5)
    else:  # the production client of that topology (a Cluster needs the hash tag)
        client = make_redis_client(request.getfixturevalue(f"{request.param}_url"), "")
        prefix = "{docllm}" if request.param == "cluster" else prefix
    # page_size=2 so that the paged reads really turn pages; a short socket timeout so that a
    # blocking wait() proves it does not depend on it.
    queue = RedisTaskQueue(client, prefix, clock=clock, page_size=2)
    keys = queue.keys

    def original_take(stamp: str | None) -> str | None:
        raw = client.rpoplpush(keys.ready, keys.processing)
        if raw is not None and stamp is not None:
            client.hset(keys.processing_ts, json.loads(raw)["task_id"], stamp)
        if raw is None or isinstance(raw, str):  # str only with decode_responses, which is off here
            return raw
        return raw.decode("utf-8", "surrogateescape")

    def original_stamp(task_id: int, stamp: str) -> None:
        client.hset(keys.processing_ts, task_id, stamp)

    yield QueueUnderTest(
        request.param, queue, clock, lambda raw: client.lpush(keys.ready, raw), original_take, original_stamp
    )
    client.close()


@pytest.fixture
def blocking_subject(subject: QueueUnderTest, request: pytest.FixtureRequest) -> QueueUnderTest:
    """For tests that need ``stage`` to block. fakeredis (2.41) answers BLMOVE on a missing key at
    once instead of blocking; strict, so that a fixed fakeredis shows up as XPASS."""
    if subject.name == "fakeredis":
        reason = "fakeredis: BLMOVE on a missing source key does not block"
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
    return subject
