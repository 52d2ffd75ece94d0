"""The claim order of lanes and tenants (issue 26, I13), on the claim script (fakeredis with Lua).

1. A state machine pushes payloads into lanes and tenants, claims in batches, ends leases (ack,
   requeue to either end) under caps, and holds the script to the reference model
   (``lanes_model.py``) claim by claim. After every claim it checks the starvation bound: a source
   (a lane's plain list, or a tenant's queue in a lane) with work and under its cap is passed over
   by at most ``2 * W * S`` claims, W the sum of the lane weights and S the number of sources a
   lane can hold (tenants + its plain list). Why: smooth weighted round robin serves a lane with
   work at least once every W claims; inside the lane the plain list and the ring alternate, and
   the ring serves its tenants in turn, new and unparked tenants joining behind.
2. Over long runs with every lane backlogged, each lane's share of claims is its weight's share
   within one claim, and tenants of a lane share it equally within one.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from docllm.domain.lanes.model import LANES, LanePolicy
from docllm.domain.tasks.payload import make_payload
from sim.manual_clock import ManualClock
from tests.property.lanes_model import LanesModel
from tests.support.memory.queue import InMemoryTaskQueue

TENANTS = ("A", "B", "C", "D")
SOURCES_PER_LANE = len(TENANTS) + 1  # the tenants, and the lane's plain list
LEASE_MS = 60_000
weights = st.fixed_dictionaries({lane: st.integers(1, 10) for lane in LANES})


def new_queue(policy: LanePolicy) -> InMemoryTaskQueue:
    tokens = itertools.count(1)
    return InMemoryTaskQueue(ManualClock(), token_factory=lambda: f"t{next(tokens)}", lanes=policy)


class LanesMachine(RuleBasedStateMachine):
    @initialize(
        w=weights,
        cap=st.integers(0, 3),
        overrides=st.dictionaries(st.sampled_from(TENANTS), st.integers(0, 3), max_size=2),
    )
    def start(self, w, cap, overrides):
        self.policy = LanePolicy(w, cap, overrides)
        self.queue, self.model = new_queue(self.policy), LanesModel(self.policy)
        self.routes: dict[str, tuple[str, str | None]] = {}
        self.leases: list[tuple[str, str]] = []  # (token, raw) held
        self.ids = itertools.count(1)
        self.waits: Counter[tuple[str, str | None]] = Counter()
        self.bound = 2 * sum(w.values()) * SOURCES_PER_LANE

    @rule(lane=st.sampled_from(LANES), tenant=st.sampled_from((None, *TENANTS)), n=st.integers(1, 4))
    def push(self, lane, tenant, n):
        for _ in range(n):
            raw = make_payload(next(self.ids), "x", lane, tenant)
            self.routes[raw] = (lane, tenant)
            self.queue.push(raw)
            self.model.push(raw, lane, tenant)

    @rule(n=st.integers(1, 5))
    def claim(self, n):
        got = self.queue.claim_batch("w", LEASE_MS, n)
        for delivery in got:
            expected = self.model.claim(self.routes)
            assert delivery.raw == expected, (delivery.raw, expected)
            self.leases.append((delivery.token, delivery.raw))
            self._passed_over(self.routes[delivery.raw])
        if len(got) < n:  # the script found nothing claimable: neither does the model
            assert self.model.claim(self.routes) is None

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), how=st.sampled_from(("ack", "back", "front")))
    def end_lease(self, data, how):
        token, raw = self.leases.pop(data.draw(st.integers(0, len(self.leases) - 1)))
        lane, tenant = self.routes[raw]
        if how == "ack":
            assert self.queue.ack(token)
            self.model.lease_ended(tenant)
        else:
            assert self.queue.requeue(token, front=how == "front")
            self.model.lease_ended(tenant)
            self.model.push(raw, lane, tenant, front=how == "front")
        self._reset_unclaimable()

    @invariant()
    def ready_counts_every_lane(self):
        if hasattr(self, "queue"):
            waiting = sum(len(q) for lane in LANES for q in self.model.queues[lane].values())
            assert self.queue.stats().ready == waiting + sum(len(p) for p in self.model.plain.values())

    # -- the starvation bound ------------------------------------------------------------------------
    def _claimable(self) -> set[tuple[str, str | None]]:
        found: set[tuple[str, str | None]] = {(lane, None) for lane in LANES if self.model.plain[lane]}
        for lane in LANES:
            for tenant, queue in self.model.queues[lane].items():
                cap = self.policy.cap_of(tenant)
                if queue and (cap == 0 or self.model.in_flight[tenant] < cap):
                    found.add((lane, tenant))
        return found

    def _passed_over(self, served: tuple[str, str | None]) -> None:
        claimable = self._claimable()
        for source in claimable:
            self.waits[source] = 0 if source == served else self.waits[source] + 1
            assert self.waits[source] <= self.bound, (source, self.waits[source], self.bound)
        self.waits[served] = 0
        self._reset_unclaimable(claimable)

    def _reset_unclaimable(self, claimable: set[tuple[str, str | None]] | None = None) -> None:
        claimable = self._claimable() if claimable is None else claimable
        for source in [s for s in self.waits if s not in claimable]:
            del self.waits[source]


TestLanesMachine = LanesMachine.TestCase
TestLanesMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


def _lanes_of(deliveries) -> Counter[str]:
    return Counter(json.loads(d.raw).get("priority", "default") for d in deliveries)


@settings(max_examples=25, deadline=None)
@given(w=weights, periods=st.integers(3, 8))
def test_lane_shares_follow_the_weights_over_long_runs(w, periods):
    queue, total = new_queue(LanePolicy(w)), sum(w.values())
    claims = periods * total
    ids = itertools.count(1)
    for lane in LANES:  # every lane backlogged for the whole run
        for _ in range(claims):
            queue.push(make_payload(next(ids), "x", lane))
    got = _lanes_of(queue.claim_batch("w", LEASE_MS, claims))
    for lane in LANES:
        assert abs(got[lane] - claims * w[lane] / total) <= 1, (got, w)


@settings(max_examples=10, deadline=None)
@given(tenants=st.integers(2, 6), rounds=st.integers(2, 6), lane=st.sampled_from(LANES))
def test_tenants_of_a_lane_share_it_equally(tenants, rounds, lane):
    queue = new_queue(LanePolicy())
    ids = itertools.count(1)
    for t in range(tenants):  # tenant 0 first with a deep backlog: it must not hold the lane
        for _ in range(rounds * tenants):
            queue.push(make_payload(next(ids), "x", lane, f"t{t}"))
    got = Counter(json.loads(d.raw)["tenant"] for d in queue.claim_batch("w", LEASE_MS, rounds * tenants))
    assert set(got.values()) == {rounds}, got
