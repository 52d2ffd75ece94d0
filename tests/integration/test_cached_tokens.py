"""Cached prompt tokens (issue 27) with the real ``openai`` client against the scripted server:
whichever field a server reports them in, they are kept apart and priced at the table's cached
price, so ``cost_usd`` is lower than the same tokens uncached; the row stores them (SQLite)."""

from __future__ import annotations

import asyncio

import pytest

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.usage import UsageMeter, metering
from docllm.domain.tasks.model import TaskStatus
from docllm.entrypoints.views import task_usage_json, usage_json
from tests.support.llm_server import CACHED_FIELDS, FakeLLM

PRICES = PriceTable.parse("test-model=2/8/0.5")  # USD per 1M prompt / completion / cached prompt tokens
DOCUMENT = "# Install\n\nRun the installer, then restart.\n"
CACHED = 20


def review(llm: FakeLLM, prices: PriceTable = PRICES) -> UsageMeter:
    meter = UsageMeter()

    async def run() -> None:
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", 5, prices=prices)
        try:
            with metering(meter):
                await reviewer.review("install.md", DOCUMENT)
        finally:
            await reviewer.close()

    asyncio.run(run())
    return meter


@pytest.mark.parametrize("field", CACHED_FIELDS)
def test_cached_prompt_tokens_are_priced_lower_whatever_field_reports_them(field):
    with FakeLLM(cached_tokens=CACHED, cached_as=field) as llm:
        usage = review(llm).total
    assert usage.prompt_tokens > CACHED and usage.cached_tokens == CACHED
    uncached = PRICES.cost("test-model", usage.prompt_tokens, usage.completion_tokens)
    assert uncached is not None
    expected = ((usage.prompt_tokens - CACHED) * 2 + CACHED * 0.5 + usage.completion_tokens * 8) / 1e6
    assert usage.cost_usd == pytest.approx(expected)
    assert usage.cost_usd < uncached


def test_without_a_cached_price_cached_tokens_cost_the_input_price():
    with FakeLLM(cached_tokens=CACHED) as llm:
        usage = review(llm, PriceTable.parse("test-model=2/8")).total
    assert usage.cached_tokens == CACHED
    assert usage.cost_usd == pytest.approx((usage.prompt_tokens * 2 + usage.completion_tokens * 8) / 1e6)


def test_a_cached_count_beyond_the_prompt_is_not_believed():
    with FakeLLM() as llm:
        llm.cached_tokens, llm.cached_as = 10**6, CACHED_FIELDS[1]  # beyond this prompt: full price
        usage = review(llm).total
    assert usage.cached_tokens == 0
    assert usage.cost_usd == PRICES.cost("test-model", usage.prompt_tokens, usage.completion_tokens)


def test_the_row_stores_cached_tokens_and_stats_and_show_report_them(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tasks.db'}")
    upgrade_schema(engine)
    repo = SqlAlchemyTaskRepository(engine)
    with FakeLLM(cached_tokens=CACHED) as llm:
        usage = review(llm).total
    task = repo.create("install.md", DOCUMENT)
    started = repo.start_attempt(task.task_id, "tok")
    assert started.task is not None
    assert repo.commit(task.task_id, started.task.attempt, {"ok": True}, usage=usage)
    row = repo.get(task.task_id)
    assert row is not None and row.status is TaskStatus.success
    assert row.usage is not None and row.usage.cached_tokens == CACHED
    assert row.usage.cost_usd == pytest.approx(usage.cost_usd)
    shown = task_usage_json(row)
    assert shown is not None and shown["cached_tokens"] == CACHED
    assert shown["cost_usd"] == pytest.approx(usage.cost_usd, abs=1e-6)
    stats = usage_json(*repo.usage_totals(3600))
    assert (stats["cached_tokens"], stats["cached_tokens_last_hour"]) == (CACHED, CACHED)
    engine.dispose()


def test_a_document_over_the_per_task_cap_fails_before_any_call():
    """The per-task cap is the spend ledger's (I16): the attempt's reservation refuses the document
    before the reviewer sends anything."""
    from docllm.domain.errors import OverCostCap
    from docllm.domain.llm.ledger import Priced
    from docllm.domain.llm.spend_ledger import SpendLedger
    from docllm.domain.tasks.verdict import Happened, happened_of

    ledger = SpendLedger(None, [Priced("default", "test-model", PRICES.price("test-model"))], task_cap_usd=1e-6)
    with pytest.raises(OverCostCap, match="DOCLLM_TASK_MAX_COST_USD") as raised:
        ledger.reserve_attempt(1, 1, "install.md", DOCUMENT, None)
    assert happened_of(raised.value) is Happened.invalid_document  # fails now, never "served"
