"""Each LLM deployment's share of the fleet's spend today (issue 27; domain/llm/budget.py), on the real
Redis: a routed review over two scripted servers at different prices counts each chunk's calls at
the deployment that served it, the spend ledger settles both shares with the fleet's total in one
script call, and a new authority-clock day starts every deployment at nothing while yesterday's
counts expire on their own."""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.llm.routed_reviewer import Route, RoutedReviewer
from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.adapters.redis.keys import RedisKeys
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.llm.budget import DAY_MS, KEEP_MS, Settle, day_of, micro
from docllm.domain.llm.deployments import Deployment
from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.spend_ledger import SpendLedger, shares
from docllm.domain.llm.usage import UsageMeter, metering
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, error
from tests.support.memory.breaker import InMemoryLlmBreaker

PREFIX = "{docllm}"
CHUNK = 400
PRICES = {"east": PriceTable.parse("test-model=1000/4000"), "west": PriceTable.parse("test-model=10/40")}


class Inline:
    async def call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


async def inline(call: Any, *args: Any) -> Any:
    return call(*args)


def document(sections: int) -> str:
    return "\n".join(f"## Section {i}\n\n" + "Plain steady text. " * 15 + "\n" for i in range(sections))


def routed(clock: ManualClock, east: FakeLLM, west: FakeLLM) -> RoutedReviewer:
    routes = []
    for order, (name, llm) in enumerate((("east", east), ("west", west))):
        d = Deployment(name=name, base_url=llm.base_url, model="test-model", api_key="k", order=order)
        reviewer = OpenAIReviewer(
            d.base_url, "k", d.model, 5, max_chunk_chars=CHUNK, prices=PRICES[name], deployment=name
        )
        routes.append(Route(d, reviewer, InMemoryLlmBreaker(clock, BreakerPolicy())))
    return RoutedReviewer(routes, "w1", max_chunk_chars=CHUNK, chunk_parallelism=1, run=inline, poll_seconds=0)


def test_two_deployments_spend_lands_apart_and_rolls_over_with_the_day(redis_url):
    clock = ManualClock(start_ms=20_000 * DAY_MS + DAY_MS - 60_000)  # a minute before the authority's midnight
    client = redis.Redis.from_url(redis_url)
    budget = RedisSpendBudget(client, PREFIX, clock)
    meter = UsageMeter()

    async def main() -> None:
        with FakeLLM() as east, FakeLLM() as west:
            reviewer = routed(clock, east, west)
            east.script(error(500, "down for one chunk"))  # the first chunk falls back to west
            with metering(meter):
                report = await reviewer.review("doc", document(3))
            await reviewer.close()
        assert report["deployments"] == ["west", "east", "east"]
        ledger = SpendLedger(budget, [])  # as an attempt's write that landed settles it
        ledger.settle([Settle(None, True, shares(meter.cost_by_deployment, meter.total.cost_usd))])

    asyncio.run(main())
    east_usd, west_usd = meter.cost_by_deployment["east"], meter.cost_by_deployment["west"]
    assert east_usd > 50 * west_usd > 0  # each priced at its own deployment's prices
    view = budget.view()
    assert view.by_deployment == {"east": micro(east_usd), "west": micro(west_usd)}
    assert abs(view.spent_micro - sum(view.by_deployment.values())) <= 1  # the shares make up the total

    keys = RedisKeys(PREFIX)
    day = day_of(clock.now_ms())
    assert 0 < client.pttl(keys.spend_by_deployment(day)) <= KEEP_MS
    assert abs(client.pttl(keys.spend_by_deployment(day)) - client.pttl(keys.spend(day))) < 1_000
    clock.advance(60_000)  # midnight on the authority clock: a new day's keys
    assert budget.view().by_deployment == {} and budget.view().spent_micro == 0
    assert budget.add(9, {"west": 9}).by_deployment == {"west": 9}
    assert client.hgetall(keys.spend_by_deployment(day))  # yesterday's, until its expiry


def test_on_a_cluster_the_shares_go_with_the_days_count(cluster_set: Any, cluster_url: str) -> None:
    """Three keys in one script call: the same hash tag puts them in one slot, as Cluster needs."""
    from docllm.adapters.redis.client import make_redis_client

    client = make_redis_client(cluster_url, "")
    clock = ManualClock(start_ms=20_000 * DAY_MS)
    budget = RedisSpendBudget(client, PREFIX, clock)  # type: ignore[arg-type]
    view = budget.add(3_000, {"east": 1_000, "west": 2_000})
    assert view.spent_micro == 3_000 and view.by_deployment == {"east": 1_000, "west": 2_000}
    assert budget.view().by_deployment == {"east": 1_000, "west": 2_000}
