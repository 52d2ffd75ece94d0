"""The fleet's spend budget (I14): the Redis adapter's script on fakeredis (the day's count, its
rollover on a stepped authority clock, the fleet's cap over the setting), and the worker's gate
on virtual time: once the fleet's spend crosses the cap no attempt starts past the gate's poll,
and the overshoot is bounded by what was in flight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import fakeredis
from hypothesis import given, settings
from hypothesis import strategies as st

from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.adapters.redis.keys import RedisKeys
from docllm.domain import events as ev
from docllm.domain.errors import Unavailable
from docllm.domain.events import RecordingEvents
from docllm.domain.llm.budget import DAY_MS, KEEP_MS, MICRO, BudgetView, Settle, day_of
from docllm.domain.llm.ledger import Priced
from docllm.domain.llm.spend_ledger import SpendLedger
from docllm.domain.llm.usage import LlmCall, record
from docllm.domain.tasks.model import TaskStatus
from docllm.runtime.budget_gate import BudgetGate
from docllm.runtime.worker import Worker
from sim.manual_clock import ManualClock
from tests.support.runtime_rig import FakeReviewer, Rig

PREFIX = "{docllm}"
POLL = 0.25


def budget_on(clock: Any, cap_usd: float = 0.0, client: Any = None) -> RedisSpendBudget:
    client = client or fakeredis.FakeRedis(server=fakeredis.FakeServer())
    return RedisSpendBudget(client, PREFIX, clock, cap_usd)


# -- the adapter ------------------------------------------------------------------------------


def test_spend_adds_up_to_the_cap_and_the_day_rolls_over_on_the_authority_clock():
    clock = ManualClock(start_ms=20_000 * DAY_MS + DAY_MS - 1_000)  # one second before midnight UTC
    budget = budget_on(clock, cap_usd=1.0)
    assert budget.view() == BudgetView(20_000, 0, MICRO, "setting")
    assert not budget.add(600_000).over
    view = budget.add(400_000)
    assert view.over and view.spent_usd == 1.0
    assert budget.view().over  # every later look sees it
    clock.advance(1_000)  # the authority's midnight: a new day's key, nothing spent in it
    assert budget.view() == BudgetView(20_001, 0, MICRO, "setting")
    clock.set(clock.now_ms() - 2_000)  # a step back over midnight finds yesterday's count again
    assert budget.view().over


def test_a_days_count_expires_on_its_own():
    clock = ManualClock()
    budget = budget_on(clock)
    budget.add(5)
    key = RedisKeys(PREFIX).spend(day_of(clock.now_ms()))
    assert 0 < budget._client.pttl(key) <= KEEP_MS


def test_the_fleets_cap_overrides_every_processs_setting_and_clearing_it_goes_back():
    clock = ManualClock()
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    ours, theirs = budget_on(clock, 1.0, client), budget_on(clock, 0.0, client)
    ours.add(2 * MICRO)
    assert ours.view().over and not theirs.view().over  # each process's own setting
    assert not ours.set_cap(5.0).over and theirs.view() == BudgetView(ours.view().day, 2 * MICRO, 5 * MICRO, "fleet")
    assert ours.set_cap(0).source == "off" and not theirs.view().over  # 0: no cap for anyone
    assert ours.set_cap(None).over and theirs.view().source == "off"  # back to the settings


def test_each_deployments_spend_lands_apart_in_the_same_step_and_rolls_over_with_the_day():
    clock = ManualClock(start_ms=20_000 * DAY_MS + DAY_MS - 1_000)
    budget = budget_on(clock)
    budget.add(3_000, {"east": 1_000, "west": 2_000})
    view = budget.add(500, {"east": 500})
    assert view.spent_micro == 3_500 and view.by_deployment == {"east": 1_500, "west": 2_000}
    assert budget.view().deployment_usd("west") == 0.002 and budget.view().deployment_usd("north") == 0
    day = day_of(clock.now_ms())
    shares = RedisKeys(PREFIX).spend_by_deployment(day)
    assert 0 < budget._client.pttl(shares) <= KEEP_MS  # expires with the day's count
    clock.advance(1_000)  # the authority's midnight: a new day, nothing spent at any deployment
    assert budget.view().by_deployment == {}
    assert budget.add(7, {"west": 7}).by_deployment == {"west": 7}
    assert RedisKeys(PREFIX).spend_by_deployment(day + 1) != shares


def test_the_shares_live_in_the_queues_hash_tag():
    keys = RedisKeys(PREFIX)
    assert keys.spend_by_deployment(5).startswith("{docllm}:") and keys.spend(5).startswith("{docllm}:")


# -- the worker's gate --------------------------------------------------------------------------


class PricedReviewer(FakeReviewer):
    """A review that records one LLM call costing ``costs[task_name]`` micro-dollars."""

    def __init__(self, seconds: float, costs: dict[str, int]):
        super().__init__(seconds)
        self.costs = costs

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        report = await super().review(task_name, document)
        record(LlmCall("m", "ok", self.seconds, 10, 1, self.costs[task_name] / MICRO))
        return report


class TimedEvents(RecordingEvents):
    def __init__(self, rig: Rig):
        super().__init__()
        self.rig = rig
        self.at: list[float] = []

    def emit(self, event: str, **fields: Any) -> None:
        super().emit(event, **fields)
        if event == ev.STARTED:
            self.at.append(self.rig.now())


def run_to_the_cap(costs: list[int], cap: int, concurrency: int, gate_on: bool = True) -> dict[str, Any]:
    names = {f"d{i}.md": c for i, c in enumerate(costs)}
    rig = Rig(PricedReviewer(0.05, names), concurrency=concurrency)
    assert rig.time is not None
    started = TimedEvents(rig)
    rig.proc.events = started
    budget = budget_on(rig.time, cap / MICRO)
    rig.proc.ledger = SpendLedger(budget, [Priced("default", "m", None)])  # counted at each write, nothing held
    crossed: list[tuple[float, int]] = []  # (loop time, spend) of the settlement that crossed the cap
    settle = budget.settle

    def watched_settle(items: Sequence[Settle]) -> BudgetView:
        view = settle(items)
        if view.over and not crossed:
            crossed.append((rig.now(), view.spent_micro))
        return view

    budget.settle = watched_settle  # type: ignore[method-assign]
    gate = BudgetGate(budget, rig.calls, logging.getLogger("test"), poll_seconds=POLL)
    if not gate_on:  # the broken mechanism: the gate never pauses
        gate.pause = _never  # type: ignore[method-assign]
    rig.worker = Worker(rig.proc, rig.calls, rig.gate, concurrency, idle_wait_seconds=0.05, budget=gate)
    ids = rig.submit(len(costs))

    async def main() -> None:
        running = asyncio.create_task(rig.worker.run())
        await rig.until(lambda: crossed or all(s is TaskStatus.success for s in rig.statuses(ids)), timeout=60)
        await asyncio.sleep(5 * POLL + 1)  # whatever was in flight ends; nothing new may start
        rig.worker.stop(1)
        await running

    rig.time.run(main())
    statuses = rig.statuses(ids)
    return {
        "crossed": crossed,
        "starts": started.at,
        "final": budget.view().spent_micro,
        "pending": statuses.count(TaskStatus.pending),
        "charged_pending": sum(
            1 for t in (rig.repo.get(i) for i in ids) if t and t.status is TaskStatus.pending and t.attempt
        ),
    }


async def _never() -> float:
    return 0.0


@settings(max_examples=25, deadline=None)
@given(
    costs=st.lists(st.integers(1, 50_000), min_size=12, max_size=40),
    concurrency=st.integers(1, 4),
    share=st.floats(0.1, 0.5),
)
def test_at_the_cap_no_attempt_starts_past_the_poll_and_the_overshoot_is_what_was_in_flight(costs, concurrency, share):
    cap = max(1, int(sum(costs[: len(costs) // 2]) * share))  # crossed with work still waiting (FIFO)
    seen = run_to_the_cap(costs, cap, concurrency)
    assert seen["crossed"], "the spend must cross a cap below the work's total"
    at, _ = seen["crossed"][0]
    late = [t for t in seen["starts"] if t > at]
    assert all(t <= at + POLL + 0.01 for t in late), f"attempts started {late} after the crossing at {at}"
    # What may still be charged after the crossing: what ran then, what started before it was seen,
    # and the ends still being written (at most ``concurrency``: their slots are free), counted when
    # their writes land (I16; with prices their holds stand meanwhile, here nothing is held).
    assert seen["final"] - cap < max(costs) * (2 * concurrency + len(late))
    # Every task that did not start waits, pending and uncharged (with cheap tasks every one may have
    # started within the gate's poll; tests/integration/test_spend_cap_fleet.py has work left waiting).
    assert seen["pending"] == len(costs) - len(seen["starts"]) and seen["charged_pending"] == 0


def test_a_gate_that_never_pauses_is_caught():
    seen = run_to_the_cap([10_000] * 30, 50_000, 2, gate_on=False)
    at, _ = seen["crossed"][0]
    assert [t for t in seen["starts"] if t > at + POLL + 0.01]  # the check above would fail


def test_the_ledger_settles_each_deployments_share_and_keeps_it_while_redis_is_down():
    budget = budget_on(ManualClock())
    settle = budget.settle
    down = [True]

    def flaky_settle(items: Sequence[Settle]) -> BudgetView:
        if down[0]:
            raise Unavailable("redis down")
        return settle(items)

    budget.settle = flaky_settle
    ledger = SpendLedger(budget, [])
    assert ledger.settle([Settle(None, True, {"east": 1_000, "west": 2_000})]) is None  # Redis down: kept
    down[0] = False
    ledger.settle([Settle(None, True, {"east": 500})])  # sent with the next
    assert budget.view().spent_micro == 3_500
    assert budget.view().by_deployment == {"east": 1_500, "west": 2_000}


def test_an_attempts_calls_are_counted_at_the_deployment_that_served_each():
    rig = Rig(SplitReviewer(0.05), concurrency=2)
    assert rig.time is not None
    budget = budget_on(rig.time)
    rig.proc.ledger = SpendLedger(budget, [Priced("default", "m", None)])
    gate = BudgetGate(budget, rig.calls, logging.getLogger("test"), poll_seconds=POLL)
    rig.worker = Worker(rig.proc, rig.calls, rig.gate, 2, idle_wait_seconds=0.05, budget=gate)
    ids = rig.submit(4)

    async def main() -> None:
        running = asyncio.create_task(rig.worker.run())
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)), timeout=60)
        await asyncio.sleep(1)  # the last spend is sent
        rig.worker.stop(1)
        await running

    rig.time.run(main())
    assert budget.view().by_deployment == {"east": 4 * 1_000, "west": 4 * 250}
    assert budget.view().spent_micro == 4 * 1_250


class Inline:
    async def call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


class SplitReviewer(FakeReviewer):
    """A review whose chunks went to two deployments: 1000 micro-dollars at east, 250 at west."""

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        report = await super().review(task_name, document)
        record(LlmCall("m", "ok", self.seconds, 10, 1, 0.001, deployment="east"))
        record(LlmCall("m", "ok", self.seconds, 10, 1, 0.00025, deployment="west"))
        return report


def test_the_deployment_spend_gauge_follows_each_view_and_a_new_day_sets_it_back_to_zero():
    from docllm.adapters.telemetry.metrics import Metrics, PrometheusEvents

    m = Metrics()
    sink = PrometheusEvents(m)

    def gauge(name: str) -> float | None:
        return m.registry.get_sample_value("docllm_deployment_spend_usd_today", {"deployment": name})

    sink.emit(ev.BUDGET_SEEN, spent_usd=0.4, cap_usd=None, over=False, source="off", by_deployment={"e": 0.3, "w": 0.1})
    assert (gauge("e"), gauge("w")) == (0.3, 0.1)
    sink.emit(ev.BUDGET_SEEN, spent_usd=0.0, cap_usd=None, over=False, source="off", by_deployment={})  # a new day
    assert (gauge("e"), gauge("w")) == (0.0, 0.0)
    sink.emit(ev.BUDGET_SEEN)  # a bare event: the gauges keep going
    assert gauge("e") == 0.0


def test_a_worker_counts_spend_when_only_its_deployments_carry_prices():
    from docllm.container import priced_deployments
    from docllm.domain.llm.deployments import Deployment
    from docllm.domain.llm.prices import Price
    from docllm.settings import Settings

    def one(price: Price | None) -> Deployment:
        return Deployment(name="e", base_url="http://e/v1", model="m", api_key="k", price=price)

    def ledger(settings: Settings) -> SpendLedger:
        return SpendLedger(None, priced_deployments(settings))

    assert ledger(Settings(llm_prices="m=1/2", llm_model="m")).unpriced == ()
    assert ledger(Settings(llm_deployments=(one(Price(1.0, 2.0)),))).unpriced == ()  # the deployment's own prices
    assert ledger(Settings(llm_deployments=(one(None),))).unpriced == ("e",)
    assert ledger(Settings(llm_deployments=(one(None),), llm_prices="m=3/4")).unpriced == ()  # the table's


def test_an_attempts_hold_stands_while_its_end_is_written():
    """Its slot is free from then on (issue 24): a next claim must find its money still held, not
    released before the end's write (here it answers 2 s late) counts it (I16)."""
    from docllm.domain.llm.prices import Price

    rig = Rig(PricedReviewer(0.05, {"d0.md": 40}), concurrency=1)
    assert rig.time is not None
    budget = budget_on(rig.time, 1.0)
    rig.proc.ledger = SpendLedger(budget, [Priced("default", "m", Price(1.0, 4.0))])
    gate = BudgetGate(budget, rig.calls, logging.getLogger("test"), poll_seconds=POLL)
    rig.worker = Worker(rig.proc, rig.calls, rig.gate, 1, idle_wait_seconds=0.05, budget=gate)
    rig.calls.slow[rig.proc.commit_many] = 2.0
    [tid] = rig.submit(1)
    seen: list[tuple[int, int]] = []

    async def main() -> None:
        running = asyncio.create_task(rig.worker.run())
        await rig.until(lambda: rig.worker.writing)
        view = budget.view()
        seen.append((view.spent_micro, view.held_micro))
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.success and not rig.worker.claimed)
        rig.worker.stop(1)
        await running

    rig.time.run(main())
    assert seen[0][0] == 0 and seen[0][1] > 0, seen  # held while the end was being written
    view = budget.view()
    assert (view.spent_micro, view.held_micro) == (40, 0)  # counted with the write, the hold released
