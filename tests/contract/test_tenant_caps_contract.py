"""Tenant caps mean realtime work in flight, on every claim path, and the tenant ring heals
(issue 44): the production Lua on fakeredis and on a real redis-server.

- A batch lane member (``claim_batch(..., lanes=("bulk",))``) neither waits for its tenant's cap
  nor counts against it: the tenant's interactive work is served while its bulk work waits in a
  provider batch, and a batch takes more than cap-many of its bulk tasks.
- The blocking claim (``stage`` + ``lease_staged``) leases no tenant payload: it goes to its tenant
  queue, where the cap-holding claim takes it.
- A lost ring that one tenant joins is healed at the next claim: every tenant with work is served
  within one turn of the ring.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import fakeredis
import pytest
import redis

from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.lanes.model import LanePolicy
from docllm.domain.tasks.payload import make_payload
from sim.manual_clock import ManualClock

LEASE = 30_000


@pytest.fixture(params=["fakeredis", pytest.param("redis", marks=pytest.mark.redis_server)])
def client(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    if request.param == "fakeredis":
        c: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        c = redis.Redis.from_url(request.getfixturevalue("redis_url"), socket_timeout=5)
    yield c
    c.close()


def make_queue(client: redis.Redis, policy: LanePolicy) -> RedisTaskQueue:
    tokens = itertools.count(1)
    prefix = f"caps{next(_prefixes)}"  # a real server is shared by the session's tests
    return RedisTaskQueue(client, prefix, clock=ManualClock(), token_factory=lambda: f"t{next(tokens)}", lanes=policy)


_prefixes = itertools.count()


def tenants(deliveries: list) -> list[str]:
    return [json.loads(d.raw).get("tenant") or "" for d in deliveries]


def test_batch_members_do_not_hold_their_tenants_realtime_cap(client: redis.Redis):
    policy = LanePolicy(tenant_cap=1, serves=("interactive", "default"))
    q = make_queue(client, policy)
    for i in range(1, 6):
        q.push(make_payload(i, f"bulk{i}.md", "bulk", "acme"))
    held = q.claim_batch("batcher", LEASE, 10, lanes=("bulk",))
    assert len(held) == 5  # one batch carries all of acme's bulk tasks, not cap-many
    q.push(make_payload(10, "now.md", "interactive", "acme"))
    q.push(make_payload(11, "now.md", "interactive", "beta"))
    served = q.claim_batch("w", LEASE, 10)
    assert sorted(tenants(served)) == ["acme", "beta"]  # acme's interactive task runs at once
    q.push(make_payload(12, "more.md", "interactive", "acme"))
    assert q.claim_batch("w", LEASE, 10) == []  # its realtime cap still holds: one in flight
    for d in held:  # the batch ends: nothing it held is given back to acme's realtime count
        assert q.ack(d.token)
    assert q.claim_batch("w", LEASE, 10) == []
    assert q.ack(served[tenants(served).index("acme")].token)
    assert tenants(q.claim_batch("w", LEASE, 10)) == ["acme"]


def test_the_blocking_claim_routes_a_tenant_payload_through_its_cap(client: redis.Redis):
    q = make_queue(client, LanePolicy(tenant_cap=1))
    q.push(make_payload(1, "a.md", None, "acme"))
    [first] = q.claim_batch("w", LEASE, 10)
    client.lpush(q.keys.ready, make_payload(2, "b.md", None, "acme"))  # a producer's raw LPUSH
    raw = q.stage(0)
    assert raw is not None
    assert q.lease_staged(raw, "w", LEASE) is None  # not leased past the cap: to acme's queue
    assert q.claim_batch("w", LEASE, 10) == []  # the cap holds
    assert q.ack(first.token)
    assert [json.loads(d.raw)["task_id"] for d in q.claim_batch("w", LEASE, 10)] == [2]
    assert q.stats().ready == 0


def test_a_plain_payload_is_still_leased_by_the_blocking_claim(client: redis.Redis):
    q = make_queue(client, LanePolicy(tenant_cap=1))
    client.lpush(q.keys.ready, make_payload(3, "c.md"))
    raw = q.stage(0)
    assert raw is not None and q.lease_staged(raw, "w", LEASE) is not None


def test_a_lost_ring_that_one_tenant_joins_serves_every_tenant_within_one_turn(client: redis.Redis):
    q = make_queue(client, LanePolicy())
    n = itertools.count(1)
    for tenant in ("A", "B", "C"):
        for _ in range(10):
            q.push(make_payload(next(n), "x.md", None, tenant))
    client.delete(q.keys.ring_default)  # Redis forgot the ring
    for _ in range(10):  # a new tenant joins, with work enough to keep the ring busy: not empty
        q.push(make_payload(next(n), "x.md", None, "D"))
    first_turn = tenants(q.claim_batch("w", LEASE, 4))
    assert sorted(first_turn) == ["A", "B", "C", "D"]
    rest = tenants(q.claim_batch("w", LEASE, 100))
    assert sorted(rest) == sorted(["A", "B", "C", "D"] * 9)
