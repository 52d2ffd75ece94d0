"""``python -m bench lanes`` (issue 26): lanes and tenants through the claim script on a real
redis-server, with a reviewer that takes no CPU: attempts last one "attempt length" (uniform
0.5..1.5, mean 1) of virtual time, so waits are in attempt lengths whatever the machine.

1. Backlog: 10,000 ``bulk`` tasks of tenant A are queued, then 100 ``interactive`` of B and 1,000
   ``default`` of C, and ``SLOTS`` slots claim and finish them. Reported: B's p95 wait (submit to
   claim), A's and C's shares of their claims while both wait (the weights say bulk:default =
   1:3), against the same run with every payload in today's single list (FIFO).
2. Claim cost: one claim per call (a round trip) and the script's own time (``INFO
   commandstats``), with 1 and with 10,000 tenants that have work in the lane.
"""

from __future__ import annotations

import heapq
import json
import random
import time
from collections import Counter

from bench.common import Env, Table, percentile, verdict
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.lanes.model import LanePolicy
from docllm.domain.tasks.payload import make_payload
from sim.manual_clock import ManualClock

DB = 9
SLOTS = 64
LEASE_MS = 10**9  # no lease expires in a run: the reaper is not part of this measurement
BACKLOG = (("A", "bulk", 10_000), ("B", "interactive", 100), ("C", "default", 1_000))
COST_CLAIMS = 5_000


def _queue(env: Env, prefix: str) -> RedisTaskQueue:
    return RedisTaskQueue(env.client(DB), prefix, clock=ManualClock(), lanes=LanePolicy())


def backlog_run(env: Env, lanes: bool, scale: int) -> dict:
    """Run the backlog to the end of B's and C's tasks; ``lanes=False``: today's single list."""
    env.flush(DB)
    queue, rng = _queue(env, "lanes"), random.Random(26)
    submitted: dict[int, str] = {}
    ids = iter(range(1, 1 << 30))
    for tenant, lane, n in BACKLOG:
        for _ in range(n // scale):
            task_id = next(ids)
            submitted[task_id] = tenant
            queue.push(make_payload(task_id, "doc.md", lane, tenant) if lanes else make_payload(task_id, "doc.md"))
    left = Counter(submitted.values())
    running: list[tuple[float, str]] = []  # (end, token)
    waits: dict[str, list[float]] = {"A": [], "B": [], "C": []}
    both_waiting: Counter[str] = Counter()  # claims of A and C while both have work queued
    now = 0.0
    while left["B"] or left["C"]:
        for d in queue.claim_batch("bench", LEASE_MS, SLOTS - len(running)):
            tenant = submitted[json.loads(d.raw)["task_id"]]
            if left["A"] and left["C"]:
                both_waiting[tenant] += 1
            left[tenant] -= 1
            waits[tenant].append(now)
            heapq.heappush(running, (now + rng.uniform(0.5, 1.5), d.token))
        now, token = heapq.heappop(running)
        queue.ack(token)
    a_c = both_waiting["A"] + both_waiting["C"]
    return {
        "b_p95": percentile(waits["B"], 95),
        "b_max": max(waits["B"]),
        "c_p95": percentile(waits["C"], 95),
        "a_share": both_waiting["A"] / a_c if a_c else None,
        "c_share": both_waiting["C"] / a_c if a_c else None,
        "claims_a_c": a_c,
    }


def claim_cost(env: Env, tenants: int, tasks: int) -> dict:
    """µs per claim (one claim per call) with ``tenants`` tenants that have work in the bulk lane."""
    env.flush(DB)
    queue, client = _queue(env, "cost"), env.client(DB)
    per = max(2, -(-tasks // tenants))
    ids = iter(range(1, 1 << 30))
    with client.pipeline(transaction=False) as pipe:
        for _ in range(per):  # round by round: every tenant has work to the end
            for t in range(tenants):
                raw = make_payload(next(ids), "doc.md", "bulk", f"t{t}")
                queue._scripts["push"](keys=queue.keys.script_keys, args=[raw, "0"], client=pipe)
            pipe.execute()
    client.config_resetstat()
    claims = min(COST_CLAIMS, per * tenants // 2)  # --quick queues fewer
    started = time.perf_counter()
    for _ in range(claims):
        assert queue.claim("bench", LEASE_MS) is not None
    elapsed = time.perf_counter() - started
    stats = client.info("commandstats")
    script = stats.get("cmdstat_evalsha", {})
    return {
        "tenants": tenants,
        "queued": per * tenants,
        "us_per_claim": elapsed / claims * 1e6,
        "server_us_per_claim": script.get("usec_per_call"),
    }


def run(env: Env, results: dict) -> list[Table]:
    scale = 10 if env.quick else 1
    lanes, fifo = backlog_run(env, True, scale), backlog_run(env, False, scale)
    costs = [claim_cost(env, tenants, 20_000 // scale) for tenants in (1, 10_000 // scale)]
    results["lanes"] = {"lanes": lanes, "fifo": fifo, "claim_cost": costs}
    share = lanes["a_share"]
    fair = share is not None and abs(share / 0.25 - 1) <= 0.10
    backlog = Table(
        "lanes",
        f"Lanes: 10,000 bulk (A), then 100 interactive (B) and 1,000 default (C); {SLOTS} slots; "
        "waits in attempt lengths",
        ["claim order", "B p95 wait", "B max wait", "C p95 wait", "A share of A+C", "C share of A+C"],
    )
    for name, r in (("lanes (8/3/1)", lanes), ("one FIFO list (before)", fifo)):
        backlog.add(name, r["b_p95"], r["b_max"], r["c_p95"], r["a_share"], r["c_share"])
    backlog.note(
        f"A:C by weight is 1:3 (A 0.25): measured {share:.3f} over {lanes['claims_a_c']} claims, "
        f"within 10 %: {verdict(fair)}"
    )
    cost = Table(
        "lanes_cost",
        f"Claim cost against tenants with work (up to {COST_CLAIMS} claims, one per call)",
        ["tenants with work", "queued", "µs per claim (round trip)", "µs per claim (script, server)"],
    )
    for c in costs:
        cost.add(c["tenants"], c["queued"], c["us_per_claim"], c["server_us_per_claim"])
    cost.note("O(1) per claim: the ring's head is popped and pushed back; no step reads every tenant")
    return [backlog, cost]
