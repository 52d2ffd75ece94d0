"""Lanes and tenants, the model (issue 26): payload fields, submit, settings, and the claim
script's routing and caps on the in-memory queue (the production Lua on fakeredis)."""

from __future__ import annotations

import itertools
import json

import pytest

from docllm.domain.errors import BadPayload
from docllm.domain.lanes.model import LanePolicy, parse_caps, parse_weights
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.payload import make_payload, parse_payload
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reconciler import Reconciler
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

LEASE_MS = 30_000


def queue(lanes: LanePolicy | None = None) -> InMemoryTaskQueue:
    tokens = itertools.count(1)
    return InMemoryTaskQueue(ManualClock(), token_factory=lambda: f"t{next(tokens)}", lanes=lanes)


def claimed(q: InMemoryTaskQueue, n: int) -> list[tuple[str | None, str | None, int]]:
    """(priority, tenant, task_id) of up to ``n`` claims, in order."""
    found = []
    for delivery in q.claim_batch("w", LEASE_MS, n):
        data = json.loads(delivery.raw)
        found.append((data.get("priority"), data.get("tenant"), data["task_id"]))
    return found


# -- the payload ------------------------------------------------------------------------------------


def test_priority_and_tenant_travel_in_the_payload_and_old_payloads_mean_default():
    ref = parse_payload(make_payload(7, "a.md", "bulk", "acme"), 10_000)
    assert (ref.task_id, ref.priority, ref.tenant) == (7, "bulk", "acme")
    assert make_payload(7, "a.md", "default") == make_payload(7, "a.md") == '{"task_id": 7, "task_name": "a.md"}'
    old = parse_payload('{"task_id": 7, "task_name": "a.md", "priority": null, "tenant": null}', 10_000)
    assert (old.priority, old.tenant) == (None, None)


@pytest.mark.parametrize(
    "members, reason",
    [
        ('"priority": "urgent"', "priority must be one of"),
        ('"priority": 1', "priority must be a plain JSON string"),
        ('"priority": "b\\u0075lk"', "priority must be a plain JSON string"),
        ('"tenant": ""', "tenant must be 1-64"),
        ('"tenant": "a|b"', "tenant must be 1-64"),
        ('"tenant": "' + "x" * 65 + '"', "tenant must be 1-64"),
        ('"tenant": ["acme"]', "tenant must be a plain JSON string"),
    ],
)
def test_a_malformed_lane_or_tenant_is_dead_lettered_with_its_reason(members, reason):
    raw = '{"task_id": 3, "task_name": "x", ' + members + "}"
    with pytest.raises(BadPayload, match=reason):
        parse_payload(raw, 10_000)
    clock = ManualClock()
    q, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    q.push(raw)  # the script sends it to the default lane's plain list: claimed, then dead-lettered
    assert q.client.lrange(q.keys.ready, 0, -1) == [raw.encode()]
    proc = TaskProcessor(q, repo, None, clock, RetryPolicy(), LeasePolicy(), "w")
    assert proc.begin(proc.claim()) is None
    [letter] = q.dead_letters()
    assert letter.raw == raw and reason in letter.reason


# -- settings ---------------------------------------------------------------------------------------


def test_weights_and_caps_parse_or_say_why():
    assert parse_weights("bulk=1, default=3,interactive=8") == {"interactive": 8, "default": 3, "bulk": 1}
    assert parse_caps("acme=4,beta=0") == {"acme": 4, "beta": 0} and parse_caps("") == {}
    for bad in ("interactive=8,default=3", "interactive=8,default=3,bulk=1,bulk=2", "interactive=x,default=1,bulk=1"):
        with pytest.raises(ValueError):
            parse_weights(bad)
    policy = LanePolicy(parse_weights("interactive=5,default=2,bulk=1"), 3, {"acme": 1})
    assert policy.script_arg() == "5,2,1;3;acme=1" and policy.cap_of("acme") == 1 and policy.cap_of("zeta") == 3


# -- submit and re-queue ----------------------------------------------------------------------------


def test_submit_puts_lane_and_tenant_on_the_row_and_the_reconciler_requeues_into_that_lane():
    clock = ManualClock()
    q, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    task = submit(repo, q, "a.md", "# A\n", priority="interactive", tenant="acme")
    row = repo.get(task.task_id)
    assert (row.priority, row.tenant) == ("interactive", "acme")
    q.client.flushall()  # Redis forgets everything
    reconciler = Reconciler(q, repo, clock, grace_ms=1_000)
    reconciler.reconcile_once()
    clock.advance(1_001)
    reconciler.reconcile_once()
    reconciler.reconcile_once()
    assert q.client.lrange(q.keys.ring_interactive, 0, -1) == [b"acme"]
    assert claimed(q, 5) == [("interactive", "acme", task.task_id)]


def test_submit_refuses_a_bad_lane_or_tenant_before_writing_anything():
    clock = ManualClock()
    q, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    for kwargs in ({"priority": "urgent"}, {"tenant": "a b"}):
        with pytest.raises(ValueError):
            submit(repo, q, "a.md", "# A\n", **kwargs)
    assert repo.non_terminal_after(None, 10) == []
    assert q.stats().ready == 0


# -- the claim script -------------------------------------------------------------------------------


def test_a_plain_lpush_of_todays_payload_is_the_default_lane_and_counts_as_ready():
    q = queue()
    q.client.lpush(q.keys.ready, make_payload(1, "old"))
    q.push(make_payload(2, "new", "bulk", "acme"))
    assert q.stats().ready == 2
    assert claimed(q, 5) == [(None, None, 1), ("bulk", "acme", 2)]  # default weighs more than bulk


def test_a_payload_pushed_straight_onto_ready_that_names_a_lane_is_routed_on_sight():
    q = queue()
    q.client.lpush(q.keys.ready, make_payload(1, "x", "interactive", "acme"), make_payload(2, "y"))
    q.push(make_payload(3, "z", "interactive"))
    # The first claim picks interactive (its plain list: task 3), the next default: task 1 is
    # moved to acme's interactive queue on sight and task 2 is taken.
    assert claimed(q, 3) == [("interactive", None, 3), (None, None, 2), ("interactive", "acme", 1)]


def test_tenants_take_turns_inside_a_lane():
    q = queue()
    for i in range(1, 7):
        q.push(make_payload(i, "x", "bulk", "A"))
    q.push(make_payload(7, "x", "bulk", "B"))
    q.push(make_payload(8, "x", "bulk", "C"))
    assert [t for _, t, _ in claimed(q, 5)] == ["A", "B", "C", "A", "A"]


def test_a_tenant_never_holds_more_than_its_cap_and_gets_its_turn_back_when_a_lease_ends():
    q = queue(LanePolicy(tenant_cap=2, tenant_caps={"B": 1}))
    for i in range(1, 6):
        q.push(make_payload(i, "x", None, "A"))
    for i in range(6, 9):
        q.push(make_payload(i, "x", None, "B"))
    first = q.claim_batch("w", LEASE_MS, 10)
    assert [json.loads(d.raw)["tenant"] for d in first] == ["A", "B", "A"]  # A at 2, B at 1: parked
    assert q.claim_batch("w", LEASE_MS, 10) == []  # the cap holds with nobody else waiting
    assert q.ack(first[1].token)  # B's lease ends: B may take one more
    assert [json.loads(d.raw)["tenant"] for d in q.claim_batch("w", LEASE_MS, 10)] == ["B"]
    assert q.requeue(first[0].token, front=True)  # back to the front of A's queue; A's turn is back
    assert [json.loads(d.raw)["task_id"] for d in q.claim_batch("w", LEASE_MS, 10)] == [1]


def test_a_deleted_tenant_ring_is_rebuilt_from_the_tenant_queues():
    q = queue()
    for i, tenant in enumerate("ABC", start=1):
        q.push(make_payload(i, "x", "bulk", tenant))
    q.client.delete(q.keys.ring_bulk)
    assert sorted(t for _, t, _ in claimed(q, 5)) == ["A", "B", "C"]
    assert q.stats().ready == 0


def test_the_reconciler_sees_payloads_in_every_lane_and_tenant_queue():
    q = queue()
    q.push(make_payload(1, "x"))
    q.push(make_payload(2, "x", "interactive"))
    q.push(make_payload(3, "x", "bulk", "acme"))
    q.push(make_payload(4, "x", None, "beta"))
    assert q.referenced_task_ids() == {1, 2, 3, 4}


# -- the batch lane's split (issue 28): the realtime claim skips bulk, the batcher takes bulk alone ----


def _push_lanes(q: InMemoryTaskQueue) -> None:
    for i, lane in enumerate(["interactive", "default", "bulk", "bulk", "default", "bulk"], 1):
        q.push(make_payload(i, f"d{i}.md", lane, "acme" if i % 2 else None))


def test_a_claim_serving_some_lanes_never_takes_from_the_others():
    q = queue(LanePolicy(serves=("interactive", "default")))
    _push_lanes(q)
    realtime = claimed(q, 10)
    assert sorted(t for _, _, t in realtime) == [1, 2, 5]
    bulk = [json.loads(d.raw)["task_id"] for d in q.claim_batch("batcher", LEASE_MS, 10, lanes=("bulk",))]
    assert sorted(bulk) == [3, 4, 6]
    assert claimed(q, 10) == [] and q.claim_batch("b", LEASE_MS, 10, lanes=("bulk",)) == []


def test_a_bulk_payload_pushed_straight_onto_ready_reaches_the_batcher_not_the_realtime_claim():
    q = queue(LanePolicy(serves=("interactive", "default")))
    q.client.lpush(q.keys.ready, make_payload(9, "x.md", "bulk"))  # an old producer's plain LPUSH
    staged = q.stage(0)
    assert staged is not None and q.lease_staged(staged, "w", LEASE_MS) is None  # routed to its lane
    assert claimed(q, 5) == []
    assert [json.loads(d.raw)["task_id"] for d in q.claim_batch("b", LEASE_MS, 5, lanes=("bulk",))] == [9]


def test_an_unknown_lane_to_serve_is_refused():
    with pytest.raises(ValueError, match="unknown lane"):
        LanePolicy(serves=("urgent",))
