"""Issue 27's "Done when" on a real redis-server and the real ``openai`` client against the
priced test server: two worker runtimes, each with its own Redis connection, queue client and
budget gate, share one queue and one daily spend count. Once the count crosses the cap, no
attempt starts on either past one second plus the gate's staleness; tasks left waiting stay
pending and uncharged; raising the cap the way ``docllm budget set`` does resumes both, and
every task ends success, committed once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import redis

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain import events as ev
from docllm.domain.events import NullEvents
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.llm.budget import BudgetView, Settle
from docllm.domain.llm.ledger import Priced
from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.spend_ledger import SpendLedger
from docllm.domain.llm.usage import UsageMeter, metering
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.runtime.budget_gate import POLL_SECONDS, BudgetGate
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import ThreadedPortCalls
from docllm.runtime.worker import Worker
from tests.support.llm_server import FakeLLM
from tests.support.memory.breaker import InMemoryLlmBreaker
from tests.support.memory.repository import InMemoryTaskRepository

PREFIX = "{docllm}"
PRICES = PriceTable.parse("test-model=1000/4000/500")  # USD per 1M tokens: dear, so a few tasks cross
DOC = "# Release checklist\n\nShip it.\n"
TASKS = 32
LATENCY_MS = 300  # each review takes a while, so the work outlasts the bound after the crossing
STOP_BOUND = 1.0 + POLL_SECONDS  # the second plus the gate's staleness
SETTLE = 2 * STOP_BOUND + 1.0  # in-flight attempts end; a start past the bound would show by then


class WallClock:
    """The authority clock: UTC milliseconds, so the day's key is today's."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)


class StartTimes(NullEvents):
    def __init__(self) -> None:
        self.at: list[float] = []

    def emit(self, event: str, **fields: Any) -> None:
        if event == ev.STARTED:
            self.at.append(time.monotonic())


class WatchedBudget(RedisSpendBudget):
    """Notes when a settlement crosses the cap: the crossing, as recorded in Redis (shared by both)."""

    crossed: list[float]

    def settle(self, items: Sequence[Settle]) -> BudgetView:
        view = super().settle(items)
        if view.over and not self.crossed:
            self.crossed.append(time.monotonic())
        return view


def task_cost(llm: FakeLLM) -> float:
    """What one task's review costs at PRICES (the server answers every task alike)."""
    meter = UsageMeter()

    async def run() -> None:
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", 5, prices=PRICES)
        try:
            with metering(meter):
                await reviewer.review("probe.md", DOC)
        finally:
            await reviewer.close()

    asyncio.run(run())
    assert meter.total.cost_usd
    return meter.total.cost_usd


def run_fleet(redis_url: str, gate_on: bool = True) -> dict[str, Any]:
    clock = WallClock()
    repo = InMemoryTaskRepository()  # the task store both runtimes share
    retry = RetryPolicy(max_attempts=3, max_handbacks=1, base_seconds=0.05, cap_seconds=0.2)
    lease = LeasePolicy(lease_seconds=10, max_runtime_seconds=30, reaper_interval_seconds=0.1)
    starts, crossed = StartTimes(), list[float]()
    clients: list[redis.Redis] = []
    runtimes: list[tuple[Worker, ThreadedPortCalls, OpenAIReviewer]] = []
    with FakeLLM(latency_ms=(LATENCY_MS, LATENCY_MS)) as llm:
        cap = 3.5 * task_cost(llm)  # crossed with most of the work still waiting
        clients.append(redis.Redis.from_url(redis_url))
        producer = RedisTaskQueue(clients[0], PREFIX, clock=clock)
        ids = [submit(repo, producer, f"d{i}.md", DOC).task_id for i in range(TASKS)]
        for name in ("w1", "w2"):  # two runtimes: nothing shared but Redis and the task store
            client = redis.Redis.from_url(redis_url)
            clients.append(client)
            queue = RedisTaskQueue(client, PREFIX, clock=clock)  # the real queue, its own connection
            budget = WatchedBudget(client, PREFIX, clock, cap)
            budget.crossed = crossed
            calls = ThreadedPortCalls(4)
            reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", 5, prices=PRICES)
            breaker = InMemoryLlmBreaker(clock, BreakerPolicy(min_calls=100, open_seconds=0.5))
            log = logging.getLogger(f"test.{name}")
            gate = BudgetGate(budget, calls, log)
            if not gate_on:  # the broken mechanism: the gate never pauses
                gate.pause = _never  # type: ignore[method-assign]
            # Counted as each write lands; unpriced for the ledger, so nothing is reserved: the cap is
            # kept by the gate alone here (reservations: tests/integration/test_spend_ledger.py).
            ledger = SpendLedger(budget, [Priced("default", "test-model", None)])
            proc = TaskProcessor(queue, repo, reviewer, clock, retry, lease, name, events=starts, ledger=ledger)
            llm_gate = LlmGate(reviewer, breaker, calls, name, log, base=0.05, cap=0.2)
            worker = Worker(proc, calls, llm_gate, 2, idle_wait_seconds=0.05, budget=gate)
            runtimes.append((worker, calls, reviewer))
        operator = RedisSpendBudget(redis.Redis.from_url(redis_url), PREFIX, clock)  # `docllm budget`'s

        async def until(done: Any, timeout: float = 60.0) -> None:
            end = time.monotonic() + timeout
            while not done() and time.monotonic() < end:
                await asyncio.sleep(0.02)

        def rows() -> list[Any]:
            return [repo.get(i) for i in ids]

        async def main() -> dict[str, Any]:
            running = [asyncio.create_task(w.run()) for w, _, _ in runtimes]
            try:
                await until(lambda: crossed or all(r.status is TaskStatus.success for r in rows()))
                await asyncio.sleep(SETTLE)
                stopped = {
                    "crossed": list(crossed),
                    "starts": list(starts.at),
                    "pending": [r for r in rows() if r.status is TaskStatus.pending],
                }
                operator.set_cap(100 * cap)  # what `docllm budget set --usd N` does
                await until(lambda: all(r.status is TaskStatus.success for r in rows()))
                return stopped
            finally:
                for w, _, _ in runtimes:
                    w.stop(1)
                await asyncio.gather(*running)
                for _, calls, reviewer in runtimes:
                    await reviewer.close()
                    calls.close()

        stopped = asyncio.run(main())
    for client in clients:
        client.close()
    return {**stopped, "final": [repo.get(i) for i in ids]}


async def _never() -> float:
    return 0.0


def test_a_cap_crossed_mid_run_stops_both_workers_and_raising_it_resumes_them(redis_url):
    seen = run_fleet(redis_url)
    assert seen["crossed"], "the spend must cross a cap below the work's total"
    at = seen["crossed"][0]
    late = [round(t - at, 3) for t in seen["starts"] if t > at]
    assert all(d <= STOP_BOUND for d in late), f"attempts started {late} s after the crossing"
    assert seen["pending"], "work must be left waiting at the cap"
    assert all(r.attempt == 0 for r in seen["pending"])  # nothing charged to a task that waited
    final = seen["final"]
    assert all(r.status is TaskStatus.success for r in final)
    assert all((r.attempt, r.retry_count, r.handbacks) == (1, 0, 0) for r in final)  # committed once


def test_a_gate_that_never_pauses_is_caught(redis_url):
    seen = run_fleet(redis_url, gate_on=False)
    at = seen["crossed"][0]
    assert [t for t in seen["starts"] if t - at > STOP_BOUND]  # the check above would fail
