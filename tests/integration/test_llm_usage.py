"""LLM usage and long documents with the real ``openai`` client against the scripted server:
chunks run with bounded parallelism and merge in document order, a cancelled review sends no
further chunk (I11), and a task's row gets the tokens, calls and cost of its attempts (SQLite),
with the Prometheus counters to match."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.telemetry.metrics import Metrics
from docllm.domain.errors import PermanentError
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.usage import LlmCall, UsageMeter, metering
from docllm.domain.review.chunking import split_markdown
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reaper import Reaper
from docllm.entrypoints.views import usage_json
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import ThreadedPortCalls
from docllm.runtime.worker import Worker
from tests.support.llm_server import FakeLLM, Reply, error, smart_answer
from tests.support.memory.breaker import InMemoryLlmBreaker
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.runtime_rig import RealClock

CHUNK = 400
PRICES = PriceTable.parse("test-model=2/8")  # USD per 1M prompt / completion tokens


def long_document(sections: int) -> str:
    """A document that splits into one chunk per section at CHUNK characters."""
    return "\n".join(f"## Section {i}\n\n" + "Plain steady text. " * 15 + "\n" for i in range(sections))


def make(llm: FakeLLM, on_call: Callable[[LlmCall], None] | None = None, **kw) -> OpenAIReviewer:
    return OpenAIReviewer(
        llm.base_url, "sk-test", "test-model", 5, max_chunk_chars=CHUNK, prices=PRICES, on_call=on_call, **kw
    )


def test_chunks_run_at_most_parallelism_at_once_and_merge_in_chunk_order():
    doc = long_document(8)
    chunks = split_markdown(doc, CHUNK)
    assert len(chunks) == 8
    meter = UsageMeter()
    with FakeLLM(latency_ms=(50, 250), seed=4) as llm:  # answers end out of order

        async def review():
            with metering(meter):
                return await make(llm, chunk_parallelism=3).review("manual", doc)

        report = asyncio.run(review())
    assert llm.max_in_flight == 3  # bounded, and the bound is used
    assert report["chunks"] == 8
    assert [f["quote"] for f in report["findings"]] == [c.text.split("\n")[0] for c in chunks]
    expected = [smart_answer(r["body"])["usage"] for r in llm.requests]
    assert meter.total.calls == 8
    assert meter.total.prompt_tokens == report["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in expected)
    assert meter.total.completion_tokens == sum(u["completion_tokens"] for u in expected)


def test_a_cancelled_review_cancels_its_chunks_and_sends_no_further_one():
    calls: list[LlmCall] = []
    with FakeLLM() as llm:
        llm.script(*[Reply(delay=5.0)] * 8)  # far longer than the cancel takes on a busy machine

        async def cancel_midway():
            review = asyncio.create_task(
                make(llm, calls.append, chunk_parallelism=2).review("manual", long_document(8))
            )
            while len(llm.requests) < 2:
                await asyncio.sleep(0.01)
            review.cancel()
            with pytest.raises(asyncio.CancelledError):
                await review
            await asyncio.sleep(5.5)  # past the answers that were in flight: nothing more is sent

        asyncio.run(cancel_midway())
        assert len(llm.requests) == 2
    assert [c.outcome for c in calls] == ["cancelled", "cancelled"]


def test_a_failed_chunk_raises_the_domain_error_and_cancels_the_rest():
    with FakeLLM() as llm:
        # The first answer comes 3 s after the 400: the rest is cancelled long before, however busy
        # the machine; were it not, its slot would send a fourth chunk.
        llm.script(Reply(delay=3.0), error(400, "this chunk is refused"), *[Reply(delay=0.3)] * 6)
        with pytest.raises(PermanentError, match="400"):
            asyncio.run(make(llm, chunk_parallelism=2).review("manual", long_document(8)))
        time.sleep(3.5)
        assert len(llm.requests) <= 3  # the two first, and at most one that started as the 400 came


def test_a_tasks_row_gets_the_usage_and_cost_of_its_attempts(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tasks.db'}")
    upgrade_schema(engine)
    repo, clock, metrics = SqlAlchemyTaskRepository(engine), RealClock(), Metrics()
    queue = InMemoryTaskQueue(clock)
    retry = RetryPolicy(max_attempts=5, base_seconds=0.05, cap_seconds=0.2)
    lease = LeasePolicy(lease_seconds=2, max_runtime_seconds=30, reaper_interval_seconds=0.1)
    with FakeLLM() as llm:
        llm.script(error(500, "upstream overloaded"))  # the first attempt fails, the second succeeds
        reviewer = make(llm, metrics.llm_call)
        task = submit(repo, queue, "checklist.md", "# Release checklist\n\nShip it.\n")
        calls = ThreadedPortCalls(4)
        breaker = InMemoryLlmBreaker(
            clock, BreakerPolicy(window_seconds=10, failure_ratio=0.5, min_calls=5, open_seconds=0.3)
        )
        gate = LlmGate(reviewer, breaker, calls, "w1", logging.getLogger("test"), base=0.05, cap=0.2)
        proc = TaskProcessor(queue, repo, reviewer, clock, retry, lease, "w1")
        worker, reaper = Worker(proc, calls, gate, 1, idle_wait_seconds=0.05), Reaper(queue, repo, retry)

        async def main():
            running = asyncio.create_task(worker.run())
            end = time.monotonic() + 20
            try:
                while time.monotonic() < end and not repo.get(task.task_id).status.terminal:
                    reaper.reap_once()
                    await asyncio.sleep(0.02)
            finally:
                worker.stop(0)
                await asyncio.wait_for(running, 5)
                calls.close()

        asyncio.run(main())
        answered = smart_answer(llm.requests[-1]["body"])["usage"]
    row = repo.get(task.task_id)
    # The 500 while the provider answers its check: handed back uncharged (counted, I12), and the
    # second attempt succeeds; each attempt wrote what it spent.
    assert row.status is TaskStatus.success and (row.attempt, row.retry_count, row.handbacks) == (2, 0, 1)
    usage = row.usage
    assert (usage.calls, usage.model) == (2, "test-model")  # the 500 and the answer
    assert (usage.prompt_tokens, usage.completion_tokens) == (answered["prompt_tokens"], answered["completion_tokens"])
    assert usage.cost_usd == pytest.approx((2 * usage.prompt_tokens + 8 * usage.completion_tokens) / 1e6)
    assert usage.llm_seconds > 0

    sample = metrics.registry.get_sample_value
    assert sample("docllm_llm_calls_total", {"model": "test-model", "outcome": "ok"}) == 1
    assert sample("docllm_llm_calls_total", {"model": "test-model", "outcome": "error"}) == 1
    assert sample("docllm_llm_tokens_total", {"model": "test-model", "kind": "prompt"}) == usage.prompt_tokens
    assert sample("docllm_llm_tokens_total", {"model": "test-model", "kind": "completion"}) == usage.completion_tokens
    assert sample("docllm_llm_cost_usd_total", {"model": "test-model"}) == pytest.approx(usage.cost_usd)
    assert sample("docllm_llm_call_seconds_count", {"model": "test-model", "outcome": "ok"}) == 1

    stats = usage_json(*repo.usage_totals(3600))
    assert (stats["calls"], stats["calls_last_hour"]) == (2, 2)
    assert stats["cost_usd"] == pytest.approx(usage.cost_usd, abs=1e-6)
    engine.dispose()
