"""The waiting work the fleet scales on (adapters/telemetry/scaling.py, ``WAITING``) is
``ready_count`` of lua/lanes.lua: on a real redis-server, wherever a payload can wait for a claim
(every lane's plain list, every tenant's queue, at the back or the front) it is counted, and a
batch's members (claimed by the batcher, under leases) and delayed retries are not.

Two guards against a new place to wait that nobody counts: every key of the layout must be
classified below (a new key fails until someone says whether a task waits in it), and after each
move the test looks through every key of the queue for the payload: a key that holds a waiting
payload must be a waiting key."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from docllm.adapters.redis.keys import _SUFFIXES, RedisKeys
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.lanes.model import BATCH_LANE, LANES
from docllm.domain.tasks.payload import make_payload
from sim.manual_clock import ManualClock

PREFIX = "waiting"
LEASE_MS = 600_000

# Every key of the layout (keys.py), by what a payload in it is doing.
WAITING = {
    "ready",
    "ready_interactive",
    "ready_bulk",
    "tenant_queue_interactive",
    "tenant_queue_default",
    "tenant_queue_bulk",
}
LEASED = {"processing", "leases", "processing_ts", "lease_index", "staging", "staging_seen"}  # being worked
NOT_WAITING = {"delayed", "dead"}  # a retry not yet due (promoted into ready when due); given up
BOOKKEEPING = {  # no payload: names, counts, marks, turns
    "clock",
    "cancelled",
    "workers",
    "ring_interactive",
    "ring_default",
    "ring_bulk",
    "parked_interactive",
    "parked_default",
    "parked_bulk",
    "tenant_in_flight",
    "lane_state",
}


def test_every_key_of_the_layout_is_classified() -> None:
    classified = WAITING | LEASED | NOT_WAITING | BOOKKEEPING
    assert not (set(_SUFFIXES) - classified), (
        f"keys.py has {sorted(set(_SUFFIXES) - classified)}: can a task wait there for a worker? If so, "
        "lanes.lua's ready_count must count it (the fleet scales on that number) and it goes in WAITING"
    )
    assert classified == set(_SUFFIXES)
    assert sum(len(group) for group in (WAITING, LEASED, NOT_WAITING, BOOKKEEPING)) == len(classified)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url, socket_connect_timeout=2) as conn:
        yield conn


@pytest.fixture
def queue(client: redis.Redis) -> RedisTaskQueue:
    return RedisTaskQueue(client, PREFIX, clock=ManualClock())


def _holders(client: redis.Redis, marker: str) -> set[str]:
    """The attributes of RedisKeys whose key holds ``marker`` anywhere (members, fields, values)."""
    keys = RedisKeys(PREFIX)
    by_name = {getattr(keys, attr): attr for attr in _SUFFIXES}
    found = set()
    for key in client.scan_iter(match=f"{PREFIX}:*"):
        name = key.decode()
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        items: list[Any]
        if kind == "list":
            items = client.lrange(key, 0, -1)
        elif kind == "hash":
            items = [b for pair in client.hgetall(key).items() for b in pair]
        elif kind in ("set",):
            items = list(client.smembers(key))
        elif kind == "zset":
            items = client.zrange(key, 0, -1)
        else:
            items = [client.get(key) or b""]
        if any(marker.encode() in item for item in items):
            assert name in by_name, f"{name} holds a payload and is not in keys.py's layout"
            found.add(by_name[name])
    return found


PLACES = list(itertools.product((None, *LANES), (None, "acme", "beta")))


def test_wherever_a_payload_waits_it_is_counted(client: redis.Redis, queue: RedisTaskQueue) -> None:
    for n, (lane, tenant) in enumerate(PLACES, start=1):
        marker = f"doc-{lane}-{tenant}"
        queue.push(make_payload(n, marker, lane, tenant), front=n % 2 == 0)
        assert queue.stats().ready == n, (lane, tenant)
        holders = _holders(client, marker)
        assert holders and holders <= WAITING, (lane, tenant, holders)
    used = {h for lane, tenant in PLACES for h in _holders(client, f"doc-{lane}-{tenant}")}
    assert used == WAITING  # every waiting key was reached: the classification is not wider than the code


def test_batch_members_and_delayed_retries_are_not_waiting(client: redis.Redis, queue: RedisTaskQueue) -> None:
    for n, tenant in enumerate((None, "acme", None, "beta"), start=1):
        queue.push(make_payload(n, f"bulk-{n}", BATCH_LANE, tenant))
    queue.push(make_payload(9, "realtime", None, None))
    assert queue.stats().ready == 5
    # The batcher's claim (serves the batch lane alone): its members leave the waiting work.
    members = queue.claim_batch("batcher", LEASE_MS, 10, (BATCH_LANE,))
    assert len(members) == 4 and queue.stats().ready == 1
    for n in range(1, 5):
        assert _holders(client, f"bulk-{n}") <= LEASED
    # A member handed back (its batch failed to upload) waits again, at the front of its lane.
    assert queue.requeue(members[0].token, front=True)
    assert queue.stats().ready == 2
    # A retry not yet due waits for its time, not for a worker.
    (realtime,) = [d for d in queue.claim_batch("worker", LEASE_MS, 10, ("default",)) if b"realtime" in d.raw.encode()]
    assert queue.retry_later(realtime.token, 60_000)
    assert queue.stats().ready == 1 and _holders(client, "realtime") == {"delayed"}
