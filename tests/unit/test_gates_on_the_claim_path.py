"""The dispatcher's gates (the LLM breaker's, the spend cap's) ask Redis on the claim path.

When a burst of answers arrives, the shared port threads hold the burst's end writes; a gate's
look queued behind them held every next claim back until the whole burst was written (issue 24:
at C = 1,024, L = 5 s the first next claim came after the burst). Here the shared threads never
answer: the gates must still let the dispatcher claim.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import fakeredis

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.adapters.redis.breaker import RedisLlmBreaker
from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.runtime.budget_gate import BudgetGate
from docllm.runtime.llm_gate import LlmGate
from sim.manual_clock import ManualClock

T = TypeVar("T")
WAIT_S = 10.0  # the pause answers at once when green; this only bounds a red run


class SharedThreadsHeld:
    """``PortCalls`` whose shared threads are all taken (``call`` never runs), while the claim
    path's own threads answer (``claim`` runs inline)."""

    busy = 0

    def __init__(self) -> None:
        self.claimed: list[str] = []

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        await asyncio.Event().wait()  # queued behind the burst's writes, for good
        raise AssertionError("unreachable")

    async def claim(self, fn: Callable[..., T], *args: Any) -> T:
        self.claimed.append(getattr(fn, "__name__", repr(fn)))
        return fn(*args)


def test_the_breakers_look_before_a_claim_does_not_queue_behind_the_shared_threads():
    calls = SharedThreadsHeld()
    breaker = RedisLlmBreaker(fakeredis.FakeRedis(), "docllm", ManualClock(), BreakerPolicy())
    gate = LlmGate(OfflineReviewer(), breaker, calls, "w1", logging.getLogger("test"))

    async def run() -> float:
        return await asyncio.wait_for(gate.pause(), WAIT_S)

    assert asyncio.run(run()) == 0.0
    assert calls.claimed == ["view"]


def test_the_spend_caps_look_before_a_claim_does_not_queue_behind_the_shared_threads():
    calls = SharedThreadsHeld()
    budget = RedisSpendBudget(fakeredis.FakeRedis(), "docllm", ManualClock(), cap_usd=10.0)
    gate = BudgetGate(budget, calls, logging.getLogger("test"))

    async def run() -> float:
        return await asyncio.wait_for(gate.pause(), WAIT_S)

    assert asyncio.run(run()) == 0.0
    assert calls.claimed == ["view"]
