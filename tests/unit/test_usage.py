"""Usage and cost: the price table, the sum of calls, and the attempt's meter reaching the row
through the fenced write of whichever outcome the attempt ends with."""

from __future__ import annotations

import asyncio

import pytest

from docllm.domain.errors import PermanentError, TransientError
from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.usage import LlmCall, Usage, UsageMeter, metering, record
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.verdict import Happened
from docllm.settings import Settings, SettingsError
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

# -- the price table ----------------------------------------------------------------------------


def test_prices_parse_per_model_with_a_default_and_slashes_in_names():
    table = PriceTable.parse(" gpt-4o-mini=0.15/0.60 , meta-llama/llama-3-8b=0.05/0.08,*=1/2,")
    assert table.cost("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert table.cost("gpt-4o-mini", 2_000, 1_000) == pytest.approx((2_000 * 0.15 + 1_000 * 0.60) / 1e6)
    assert table.cost("meta-llama/llama-3-8b", 0, 1_000_000) == pytest.approx(0.08)
    assert table.cost("anything-else", 1_000_000, 1_000_000) == pytest.approx(3.0)
    assert PriceTable.parse(str(table)) == table


def test_cached_prompt_tokens_cost_the_cached_price_and_the_input_price_without_one():
    table = PriceTable.parse("m=2/8/0.5,*=2/8")
    assert table.cost("m", 1_000, 100, cached_tokens=400) == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 8) / 1e6)
    assert table.cost("other", 1_000, 100, cached_tokens=400) == table.cost("other", 1_000, 100)
    assert table.cost("m", 10, 0, cached_tokens=50) == table.cost("m", 10, 0, cached_tokens=10)  # at most all
    assert PriceTable.parse(str(table)) == table


def test_a_model_without_a_price_has_no_cost():
    assert PriceTable.parse("gpt-4o=2.5/10").cost("gpt-4o-mini", 10, 10) is None
    assert PriceTable().cost("gpt-4o", 10, 10) is None


@pytest.mark.parametrize(
    "text, says",
    [
        ("gpt-4o=2.5", "INPUT/OUTPUT"),
        ("gpt-4o=2.5/10/1/0", "INPUT/OUTPUT"),
        ("=1/2", "not MODEL=INPUT/OUTPUT"),
        ("gpt-4o", "not MODEL=INPUT/OUTPUT"),
        ("gpt-4o=a/10", "'a' is not a number"),
        ("gpt-4o=-1/10", ">= 0"),
        ("gpt-4o=inf/10", ">= 0"),
        ("gpt-4o=1/2,gpt-4o=3/4", "priced twice"),
    ],
)
def test_a_bad_price_table_is_refused_at_start_naming_the_setting(text, says):
    with pytest.raises(ValueError, match=says):
        PriceTable.parse(text)
    with pytest.raises(SettingsError, match=f"DOCLLM_LLM_PRICES=.*{says}"):
        Settings.from_env({"DOCLLM_LLM_PRICES": text})


def test_prices_that_miss_the_configured_model_are_refused():
    env = {"DOCLLM_LLM_PROVIDER": "openai", "DOCLLM_LLM_API_KEY": "k", "DOCLLM_LLM_MODEL": "gpt-4o"}
    with pytest.raises(SettingsError, match="DOCLLM_LLM_PRICES=.*no price for 'gpt-4o'"):
        Settings.from_env({**env, "DOCLLM_LLM_PRICES": "gpt-4o-mini=0.15/0.6"})
    assert Settings.from_env({**env, "DOCLLM_LLM_PRICES": "*=1/1"}).price_table.cost("gpt-4o", 1, 1) == 2e-6
    assert Settings.from_env(env).price_table == PriceTable()  # unset: no cost, no error


def test_chunk_parallelism_must_be_positive():
    assert Settings.from_env({}).llm_chunk_parallelism == 4
    with pytest.raises(SettingsError, match="DOCLLM_LLM_CHUNK_PARALLELISM"):
        Settings.from_env({"DOCLLM_LLM_CHUNK_PARALLELISM": "0"})


# -- sums and the meter -------------------------------------------------------------------------


def call(outcome="ok", prompt=100, completion=20, cost=0.5, model="m") -> LlmCall:
    return LlmCall(model, outcome, 1.5, prompt, completion, cost)


def test_usage_adds_calls_and_keeps_an_unknown_cost_unknown():
    total = Usage.of(call()) + Usage.of(call("error", 0, 0, None, "n"))
    assert total == Usage(2, 100, 20, 3.0, "n", 0.5)
    assert (Usage() + Usage.of(call(cost=None))).cost_usd is None
    assert (Usage.of(call(cost=None)) + Usage.of(call(cost=0.25))).cost_usd == 0.25


def test_calls_count_on_the_meter_of_the_attempt_running_them_and_its_subtasks():
    first, second = UsageMeter(), UsageMeter()

    async def attempt(meter: UsageMeter, n: int) -> None:
        with metering(meter):
            await asyncio.gather(*(asyncio.create_task(one()) for _ in range(n)))  # chunk tasks inherit it

    async def one() -> None:
        await asyncio.sleep(0)
        record(call())

    async def both() -> None:
        await asyncio.gather(attempt(first, 3), attempt(second, 2))

    asyncio.run(both())
    record(call())  # outside any attempt: kept nowhere
    assert (first.total.calls, second.total.calls) == (3, 2)


# -- the meter reaches the row ------------------------------------------------------------------


class MeteredReviewer:
    """Makes two LLM calls per review, then answers or raises as told."""

    name = "openai"

    def __init__(self, *ends: BaseException | None):
        self.ends = list(ends)

    async def review(self, task_name, document):
        record(call(prompt=10, completion=1, cost=0.25))
        record(call("error", 0, 0, 0.0))
        end = self.ends.pop(0) if self.ends else None
        if end is not None:
            raise end
        return {"findings": [], "summary": "ok", "reviewer": "openai"}

    async def check(self):
        pass


def run_attempts(reviewer, max_attempts=3):
    clock = ManualClock()
    queue, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    retry = RetryPolicy(max_attempts=max_attempts, base_seconds=1, cap_seconds=1)
    lease = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)
    proc = TaskProcessor(queue, repo, reviewer, clock, retry, lease, "w1")
    task = submit(repo, queue, "doc.md", "# T\n\ntext\n")
    while not repo.get(task.task_id).status.terminal:
        clock.advance(2_000)
        queue.promote_due(10)
        attempt = proc.begin(proc.claim())
        proc.finish(attempt, asyncio.run(proc.review(attempt)))
    return repo, repo.get(task.task_id)


def test_a_retried_then_successful_task_sums_the_usage_of_every_attempt():
    repo, row = run_attempts(MeteredReviewer(TransientError("500")))
    assert row.status.value == "success" and row.attempt == 2
    assert row.usage == Usage(calls=4, prompt_tokens=20, completion_tokens=2, llm_seconds=6.0, model="m", cost_usd=0.5)
    every, last_hour = repo.usage_totals(3600)
    assert every == last_hour == Usage(4, 20, 2, 6.0, None, 0.5)


def test_a_failed_task_keeps_the_usage_of_its_attempts():
    _, row = run_attempts(MeteredReviewer(PermanentError("400")))
    assert row.status.value == "failed" and row.usage is not None and row.usage.calls == 2


def reviewed_attempt():
    """A started attempt whose review has run: its calls are on the meter, nothing written yet."""
    clock = ManualClock()
    queue, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    proc = TaskProcessor(
        queue, repo, MeteredReviewer(), clock, RetryPolicy(max_attempts=3), LeasePolicy(30, 120, 5), "w1"
    )
    task = submit(repo, queue, "doc.md", "text")
    attempt = proc.begin(proc.claim())
    asyncio.run(proc.review(attempt))
    return proc, repo, task, attempt


def test_an_attempt_abandoned_with_a_verdict_writes_what_it_spent():
    proc, repo, task, attempt = reviewed_attempt()  # then the runtime times it out
    assert proc.finish(attempt, proc.ending(attempt, Happened.timed_out))
    assert repo.get(task.task_id).usage.calls == 2


def test_a_reviewer_without_llm_calls_leaves_the_usage_empty():
    class Offline:
        name = "offline"

        async def review(self, task_name, document):
            return {"findings": [], "summary": "", "reviewer": "offline"}

    repo, row = run_attempts(Offline())
    assert row.usage is None
    assert repo.usage_totals() == (Usage(), Usage())


def test_an_attempt_that_lost_its_lease_hands_back_what_it_spent():
    proc, repo, task, attempt = reviewed_attempt()
    assert proc.hand_back(attempt)
    row = repo.get(task.task_id)
    assert (row.status.value, row.retry_count, row.usage.calls) == ("pending", 0, 2)
