"""Scenarios of issue 44's lanes on virtual time: the real Worker and its dispatcher (claims, the
blocking wait) over the production Lua on fakeredis; each turns red when its mechanism is broken
on purpose (the ``break_*`` tests).

- caps with batches: a tenant's bulk tasks are held by the batch lane (claimed, not ended, as a
  provider batch holds them) while its interactive tasks arrive; the worker serves those as
  another tenant's, under the realtime cap of 1.
- a lost ring with one tenant joining: three tenants with work lose their ring, a fourth joins it
  with work of its own; every tenant starts a task within the first turn of the ring.
"""

from __future__ import annotations

import contextlib
from typing import Any

from docllm.adapters.redis.queue import base
from docllm.domain import events as ev
from docllm.domain.lanes.model import LanePolicy
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.producer import submit
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.runtime_rig import FakeReviewer, Rig, run

REVIEW_S = 0.2


def rig_with(policy: LanePolicy, concurrency: int) -> Rig:
    rig = Rig(FakeReviewer(REVIEW_S), lease=30.0, concurrency=concurrency)
    rig.queue = rig.proc.queue = InMemoryTaskQueue(rig.clock, lanes=policy)  # type: ignore[assignment]
    return rig


def started(rig: Rig) -> list[dict[str, Any]]:
    return [fields for name, fields in rig.events.events if name == ev.STARTED]


def started_tenants(rig: Rig) -> list[str]:
    tenant = {row.task_id: row.tenant or "" for row in rig.repo.recent(1000)}
    return [tenant[e["task_id"]] for e in started(rig)]


def caps_with_batches(rig: Rig) -> tuple[int, dict[str, float]]:
    """acme's 6 bulk tasks held by the batch lane, then 2 interactive tasks each of acme and beta:
    how many the batch took, and when (virtual s) each interactive task had succeeded, within 2 s."""
    for i in range(6):
        submit(rig.repo, rig.queue, f"bulk{i}.md", "# T\n", priority="bulk", tenant="acme")
    held = rig.proc.claim_batch(10, ("bulk",))  # a provider batch holds them for hours
    ids = {
        f"{tenant}{i}": submit(rig.repo, rig.queue, f"{tenant}{i}.md", "# T\n", priority="interactive", tenant=tenant)
        for tenant in ("acme", "beta")
        for i in range(2)
    }
    done: dict[str, float] = {}

    def all_served() -> bool:
        for name, task in ids.items():
            row = rig.repo.get(task.task_id)
            if name not in done and row is not None and row.status is TaskStatus.success:
                done[name] = rig.now()
        return len(done) == len(ids)

    async def scenario(rig: Rig) -> None:
        with contextlib.suppress(AssertionError):  # the test says what was not served
            await rig.until(all_served, 2.0, every=0.05)

    run(rig, scenario)
    return len(held), done


def test_caps_with_batches_a_tenants_interactive_work_runs_while_its_bulk_work_waits_in_a_batch():
    rig = rig_with(LanePolicy(tenant_cap=1, serves=("interactive", "default")), concurrency=4)
    held, done = caps_with_batches(rig)
    assert held == 6  # one batch carries all of acme's bulk tasks, not cap-many
    assert set(done) == {"acme0", "acme1", "beta0", "beta1"}  # served, under the cap of 1, within the run
    assert max(done.values()) < 10 * REVIEW_S


def lost_ring(rig: Rig) -> list[str]:
    n = 0
    for tenant in ("A", "B", "C"):
        for _ in range(10):
            n += 1
            submit(rig.repo, rig.queue, f"{tenant}{n}.md", "# T\n", tenant=tenant)
    rig.queue.client.delete(rig.queue.keys.ring_default)  # Redis forgot the ring
    for _ in range(10):
        n += 1
        submit(rig.repo, rig.queue, f"D{n}.md", "# T\n", tenant="D")  # a tenant joins, with work

    async def scenario(rig: Rig) -> None:
        await rig.until(lambda: len(started(rig)) >= 8, 20.0)

    run(rig, scenario)
    return started_tenants(rig)


def test_a_lost_ring_that_one_tenant_joins_serves_every_tenant_within_one_turn():
    order = lost_ring(rig_with(LanePolicy(), concurrency=1))
    assert sorted(order[:4]) == ["A", "B", "C", "D"], order


# -- each mechanism broken on purpose turns its scenario red ----------------------------------------


def test_break_counting_batch_members_the_caps_scenario_goes_red(monkeypatch):
    monkeypatch.setattr(LanePolicy, "batching", LanePolicy.serving)  # members counted against the cap
    rig = rig_with(LanePolicy(tenant_cap=1, serves=("interactive", "default")), concurrency=4)
    held, done = caps_with_batches(rig)
    assert held == 1 or not {"acme0", "acme1"} <= set(done)


def test_break_healing_only_an_empty_ring_the_lost_ring_scenario_goes_red(monkeypatch):
    heal = "  if n <= redis.call('LLEN', RING[lane]) + redis.call('SCARD', PARKED[lane]) then return end"
    empty_only = "  if redis.call('LLEN', RING[lane]) > 0 or n <= redis.call('SCARD', PARKED[lane]) then return end"
    real = base.with_lib

    def broken(body: str) -> str:
        text = real(body)
        assert heal in text
        return text.replace(heal, empty_only)

    monkeypatch.setattr(base, "with_lib", broken)
    base.script_text.cache_clear()
    try:
        order = lost_ring(rig_with(LanePolicy(), concurrency=1))
    finally:
        monkeypatch.undo()
        base.script_text.cache_clear()
    assert sorted(order[:4]) != ["A", "B", "C", "D"], order  # the newcomer took the turns
