"""The review cache with several deployments (issue 46): who answers is in the key, so a chunk a
fallback deployment of another model answered is never served for the first deployment's request;
the chunks the first one answered are. RoutedReviewer against two OpenAI-compatible test servers,
inside an attempt's recall as ``TaskProcessor.observe`` runs it."""

from __future__ import annotations

import asyncio

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.llm.routed_reviewer import Route, RoutedReviewer
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.llm.deployments import Deployment
from docllm.domain.review.cache import Recall, recalling
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, error
from tests.support.memory.breaker import InMemoryLlmBreaker

CHUNK = 400
POLICY = BreakerPolicy(window_seconds=60, failure_ratio=0.5, min_calls=100, open_seconds=30)
DOC = "\n".join(f"## Section {i}\n\n" + "Plain steady text. " * 15 + "\n" for i in range(3))


async def inline(call, *args):
    return call(*args)


def routed(first: FakeLLM, second: FakeLLM) -> RoutedReviewer:
    clock, routes = ManualClock(), []
    for order, (name, llm, model) in enumerate((("east", first, "model-a"), ("west", second, "model-b"))):
        d = Deployment(name=name, base_url=llm.base_url, model=model, api_key="k", order=order)
        reviewer = OpenAIReviewer(d.base_url, "k", d.model, 5, max_chunk_chars=CHUNK, deployment=name)
        routes.append(Route(d, reviewer, InMemoryLlmBreaker(clock, POLICY)))
    return RoutedReviewer(routes, "w1", max_chunk_chars=CHUNK, chunk_parallelism=1, run=inline, poll_seconds=0)


def chats(llm: FakeLLM) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in llm.requests)


def test_a_fallbacks_answer_is_not_served_for_the_first_deployments_request():
    async def main(first: FakeLLM, second: FakeLLM) -> None:
        reviewer = routed(first, second)
        try:
            first.script(error(500, "down for this one"))  # chunk 1 falls back to west (model-b)
            asked = Recall()
            with recalling(asked):
                report = await reviewer.review("doc.md", DOC)
            assert report["deployments"] == ["west", "east", "east"] and len(asked.answered) == 3
            committed = {e.key: e for e in asked.entries(task_id=5, now_ms=0)}  # as the commit writes them
            assert sorted(e.model for e in committed.values()) == ["model-a", "model-a", "model-b"]

            again = Recall(hits=committed)
            before = (chats(first), chats(second))
            with recalling(again):
                report = await reviewer.review("doc.md", DOC)
            # Chunks 2 and 3 (east's) from the cache; chunk 1 (west's, another model) asked of east.
            assert (chats(first), chats(second)) == (before[0] + 1, before[1])
            assert again.report_field() == [{"chunk": 2, "task_id": 5}, {"chunk": 3, "task_id": 5}]
            assert report["deployments"] == ["east", "(cache)", "(cache)"]  # nothing was sent for those
        finally:
            await reviewer.close()

    with FakeLLM() as first, FakeLLM() as second:
        asyncio.run(main(first, second))
