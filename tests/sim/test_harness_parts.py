"""The harness's own parts: event order, windows, crash budgets, clocks, the database's clock."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from sqlalchemy import text

from docllm.adapters.sql.engine import make_engine
from sim.clocks import DbClock, WallClock, authority_clock, install_db_clock
from sim.fault_injection import Crash
from sim.faults import KINDS, FaultPlan, poisson, restore, snapshot
from sim.world import EPOCH_MS, Actor, SimBudget, Windows, World


def test_events_run_in_time_then_scheduling_order():
    world, seen = World(1), []
    world.after(20, lambda: seen.append("b"))
    world.after(10, lambda: seen.append("a"))
    world.after(20, lambda: seen.append("c"))
    world.run(lambda: False, until=100)
    assert seen == ["a", "b", "c"] and world.now == 100


def test_a_crashed_actor_loses_its_pending_events_and_restarts_fresh():
    world, seen = World(1), []

    class Probe(Actor):
        kind = "probe"

        def start(self):
            self.after(10, lambda: seen.append(self.label))

    probe = Probe(world, "p")
    probe.restart_delay_ms = lambda: 50
    probe.boot()
    probe.after(30, lambda: seen.append("never"))
    world.after(20, lambda: probe.crash("test"))
    world.run(lambda: False, until=200)
    assert seen == ["p#1", "p#2"]


def test_a_paused_actor_runs_its_events_when_the_pause_ends():
    world, seen = World(1), []
    actor = Actor(world, "a")
    actor.boot()
    actor.after(10, lambda: seen.append(world.now))
    world.after(5, lambda: actor.pause(1_000))
    world.run(lambda: False, until=5_000)
    assert seen == [1_005]


def test_windows_overlap_merges_intervals():
    w = Windows()
    w.add("redis", 10, 30)
    w.add("db", 20, 40)
    w.open("no_reaper", 90)
    assert w.overlap(("redis", "db"), 0, 100) == 30
    assert w.overlap(("redis", "db", "no_reaper"), 0, 100) == 40
    assert w.overlap(("redis",), 25, 100) == 5


@pytest.mark.parametrize("after", [False, True])
def test_budget_crashes_at_a_named_call(after):
    budget, done = SimBudget(), []
    budget.arm_at("repo.commit", after=after)
    for call in ("queue.claim", "repo.commit", "queue.ack"):
        try:
            budget.tick(call)
        except Crash as crash:
            done.append(f"crash {crash}")
            break
        done.append(call)
    expected = (
        ["queue.claim", "repo.commit", "crash after repo.commit"]
        if after
        else ["queue.claim", "crash before repo.commit"]
    )
    assert done == expected


def test_budget_owes_a_crash_when_its_last_allowed_call_ended_the_step():
    budget = SimBudget()
    budget.arm(1)
    budget.tick("queue.claim")
    assert budget.due() == "at the end of its step"
    assert budget.due() is None


def test_clocks_follow_true_time_with_their_offsets():
    world = World(1)
    authority = authority_clock(world, offset_ms=lambda: -3_600_000)
    wall = WallClock(world, offset_ms=5_000, drift_ppm=1_000)
    world.after(1_000_000, lambda: None)
    world.run(lambda: False, until=1_000_000)
    assert authority.now_ms() == EPOCH_MS - 3_600_000 + 1_000_000
    assert wall.now_ms() == EPOCH_MS + 1_000_000 + 5_000 + 1_000


def test_the_database_tells_virtual_time_in_utc_and_now_in_its_zone():
    world = World(1)
    engine = make_engine("sqlite://")
    install_db_clock(engine, DbClock(world, offset_ms=0, tz_hours=8))
    with engine.begin() as conn:
        utc = conn.execute(text("SELECT strftime('%Y-%m-%d %H:%M:%f000', 'now')")).scalar()
        local = conn.execute(text("SELECT sim_db_now()")).scalar()
        other = conn.execute(text("SELECT strftime('%Y', '2001-02-03')")).scalar()
    assert utc == "2023-11-14 22:13:20.000000"
    assert local == "2023-11-15 06:13:20"
    assert other == "2001"


def test_poisson_is_seeded():
    assert [poisson(random.Random(3), 2.0) for _ in range(5)] == [poisson(random.Random(3), 2.0) for _ in range(5)]


def test_every_fault_kind_has_an_action_but_the_failover_scheduled_from_its_snapshot():
    plan = FaultPlan(SimpleNamespace(world=World(1)))
    assert set(plan.actions) == set(KINDS) - {"redis_failover"}


def test_a_snapshot_restores_every_key():
    import fakeredis

    client = fakeredis.FakeRedis()
    client.lpush("l", b"a", b"b")
    client.hset("h", mapping={b"k": b"v"})
    client.zadd("z", {b"m": 1.5})
    snap = snapshot(client)
    client.flushall()
    client.set("new", b"x")
    restore(client, snap)
    assert client.lrange("l", 0, -1) == [b"b", b"a"]
    assert client.hgetall("h") == {b"k": b"v"}
    assert client.zrange("z", 0, -1, withscores=True) == [(b"m", 1.5)]
    assert client.get("new") is None


# -- the faults of issue 22 ----------------------------------------------------------------------
def _run(world: World, coro):
    task = world.loop.create_task(coro)
    world.run(task.done, until=world.now + 600_000)
    return task


def test_a_partition_cuts_its_host_alone_and_its_failed_calls_are_kept():
    from docllm.domain.errors import ProviderUnavailable
    from sim.llm import LlmProfile, SimLLM

    world = World(1)
    llm = SimLLM(LlmProfile(), random.Random(1), now=lambda: world.now)
    llm.cut["w1"] = 60_000
    cut, other = llm.for_host("w1"), llm.for_host("w2")
    assert isinstance(_run(world, cut.check()).exception(), ProviderUnavailable)
    assert _run(world, other.check()).exception() is None

    async def review(reviewer):
        return await reviewer.review("doc-1.md", "# text")

    failed = world.loop.create_task(review(cut), name="review-tok-1")
    world.run(failed.done, until=world.now + 600_000)
    assert "partition of host w1" in str(failed.exception()) and llm.partition_failed == {"tok-1": "w1"}
    assert _run(world, review(other)).exception() is None
    world.close()


def test_a_provider_hold_refuses_every_call_until_it_ends():
    from sim.llm import LlmProfile, SimLLM

    now = [0]
    llm = SimLLM(LlmProfile(), random.Random(1), now=lambda: now[0])
    llm.hold_next_s = 300.0
    _, first = llm.draw("doc-1.md")
    assert first is not None and first.retry_after == 300.0
    now[0] = 299_000
    _, held = llm.draw("doc-2.md")
    assert held is not None and held.retry_after == 1 and llm.hold_429s == 1
    now[0] = 300_000
    assert llm.draw("doc-3.md")[1] is None


def test_garbage_headers_are_bounded_by_the_products_parser_and_believed_by_the_break():
    from docllm.adapters.llm.provider_hints import hints_from_headers
    from sim.breaks import BREAKS, unbounded_hints

    headers = {"retry-after": "1e20", "x-ratelimit-remaining-requests": "inf", "x-ratelimit-reset-requests": "1s"}
    assert hints_from_headers(headers).retry_after_s is None
    assert hints_from_headers(headers).remaining_requests is None
    believed = unbounded_hints(headers)
    assert believed.retry_after_s == 1e20 and believed.remaining_requests == float("inf")
    assert BREAKS["believe-hints"].hints_parser is unbounded_hints


def test_a_flapping_host_reads_time_off_every_other_read_and_each_flip_is_a_step():
    from sim.runner import Options, build

    system = build("blame", "product", 0, Options())
    try:
        system.flaps["w1"] = (60_000, 15_000)
        assert [system.flap_offset("w1") for _ in range(4)] == [15_000, 0, 15_000, 0]
        assert system.flap_offset("w2") == 0
        assert len(system.clock_steps) == 8  # each flip: now, and the other clock's windows met again
        system.world.now = 60_000
        assert system.flap_offset("w1") == 0 and "w1" not in system.flaps
    finally:
        system.world.close()
