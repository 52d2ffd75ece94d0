"""RoutedReviewer against two scripted OpenAI-compatible servers (ARCHITECTURE.md, Deployments):
each chunk goes to the first healthy deployment, falls back on 5xx or no connection, is never
sent to two at once, passes over a deployment whose breaker is open, and a recovered deployment
takes its share again after its breaker's probe."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.llm.routed_reviewer import Route, RoutedReviewer
from docllm.domain.errors import ConfigurationError, ProviderUnavailable
from docllm.domain.llm.breaker import BreakerPolicy, BreakerState
from docllm.domain.llm.deployments import Deployment
from docllm.domain.llm.rate_gate import RateGate
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, Reply, error
from tests.support.memory.breaker import InMemoryLlmBreaker
from tests.support.memory.rate_limiter import InMemoryRateLimiter
from tests.support.runtime_rig import RealClock

CHUNK = 400
POLICY = BreakerPolicy(window_seconds=60, failure_ratio=0.5, min_calls=3, open_seconds=30)


def document(sections: int) -> str:
    return "\n".join(f"## Section {i}\n\n" + "Plain steady text. " * 15 + "\n" for i in range(sections))


async def inline(call: Any, *args: Any) -> Any:
    return call(*args)


def routed(clock: ManualClock, *servers: tuple[str, FakeLLM]) -> RoutedReviewer:
    routes = []
    for order, (name, llm) in enumerate(servers):
        d = Deployment(name=name, base_url=llm.base_url, model="test-model", api_key="k", order=order)
        reviewer = OpenAIReviewer(d.base_url, "k", d.model, 5, max_chunk_chars=CHUNK, deployment=name)
        routes.append(Route(d, reviewer, InMemoryLlmBreaker(clock, POLICY)))
    # One chunk at a time: the test reads which deployment each one went to, in order. The
    # breakers are looked at on every chunk: their clock is the test's, not the event loop's.
    return RoutedReviewer(routes, "w1", max_chunk_chars=CHUNK, chunk_parallelism=1, run=inline, poll_seconds=0)


def chats(llm: FakeLLM) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in llm.requests)


def run(test: Callable[[ManualClock], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test(ManualClock()))  # one loop per test: the reviewers' HTTP pools belong to it


def test_chunks_go_to_the_first_deployment_and_fall_back_chunk_by_chunk():
    run(_first_then_fallback)


async def _first_then_fallback(clock: ManualClock) -> None:
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = routed(clock, ("first", first), ("second", second))
        report = await reviewer.review("doc", document(3))
        assert report["deployments"] == ["first"] * 3 and chats(second) == 0

        first.script(error(500, "down for this one"))  # the next chunk only
        report = await reviewer.review("doc", document(3))
        assert report["deployments"] == ["second", "first", "first"]
        assert chats(first) == 3 + 3 and chats(second) == 1  # the failed chunk: once to each, in turn
        await reviewer.close()


def test_an_open_deployment_is_passed_over_until_its_probe_finds_it_back():
    run(_open_then_back)


async def _open_then_back(clock: ManualClock) -> None:
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = routed(clock, ("first", first), ("second", second))
        port = first.port
        first.stop()  # connection refused
        report = await reviewer.review("doc", document(6))
        assert report["deployments"] == ["second"] * 6
        breaker = reviewer.routes["first"].breaker
        assert breaker.view().state is BreakerState.open  # min_calls failures opened it
        # Open: the chunks go straight to the second one.
        before = breaker.view().failures
        clock.advance(2000)
        assert (await reviewer.review("doc", document(2)))["deployments"] == ["second"] * 2
        assert breaker.view().failures == before

        # Back, and past the open interval: one chunk probes it, the breaker closes, it takes the work again.
        with FakeLLM(port=port) as back:
            clock.advance(POLICY.open_ms + 2000)
            report = await reviewer.review("doc", document(3))
            assert report["deployments"] == ["first"] * 3 and chats(back) == 3
            assert breaker.view().state is BreakerState.closed
            await reviewer.close()


def test_every_deployment_failing_is_the_providers_failure():
    run(_all_fail)


async def _all_fail(clock: ManualClock) -> None:
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = routed(clock, ("first", first), ("second", second))
        first.script(error(503, "busy"))
        second.script(error(500, "down"))
        with pytest.raises(ProviderUnavailable, match="every LLM deployment failed"):
            await reviewer.review("doc", document(1))
        assert chats(first) == chats(second) == 1
        await reviewer.close()


def limited(clock: Any, rpm: int, max_wait: float, *servers: tuple[str, FakeLLM]) -> RoutedReviewer:
    """As ``routed``, the first deployment under ``rpm`` (its own limiter and gate)."""
    reviewer = routed(clock, *servers)
    first = reviewer.routes[servers[0][0]]
    gate = RateGate(InMemoryRateLimiter(clock, rpm=rpm), run=inline)
    first.reviewer = OpenAIReviewer(
        first.deployment.base_url, "k", "test-model", 5, max_chunk_chars=CHUNK, gate=gate, deployment=servers[0][0]
    )
    reviewer._max_wait = max_wait
    return reviewer


def test_a_deployment_whose_turn_is_too_far_away_is_passed_over():
    run(_passed_over_for_limits)


async def _passed_over_for_limits(clock: ManualClock) -> None:
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = limited(clock, 2, 5.0, ("first", first), ("second", second))  # a turn every 30 s
        started = time.monotonic()
        report = await reviewer.review("doc", document(6))
        assert time.monotonic() - started < 5.0  # nobody waited 30 s for a turn
        assert "second" in report["deployments"] and report["deployments"][0] == "first"
        assert reviewer.routes["first"].breaker.view().failures == 0  # a limit is not a failure
        await reviewer.close()


def test_when_the_others_are_down_a_chunk_waits_for_its_turn_rather_than_fail():
    asyncio.run(_waits_when_alone())


async def _waits_when_alone() -> None:
    clock = RealClock()
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = limited(clock, 120, 0.01, ("first", first), ("second", second))  # a turn every 0.5 s
        second.stop()
        report = await reviewer.review("doc", document(4))
        assert report["deployments"] == ["first"] * 4
        await reviewer.close()


# -- refusals (issue 43): a deployment's 401/403/404/quota is its failure alone --------------------


def test_a_deployment_that_refuses_fails_alone_and_its_breaker_opens():
    run(_refusal_falls_back)


async def _refusal_falls_back(clock: ManualClock) -> None:
    with FakeLLM(unauthorized=True) as primary, FakeLLM() as backup:  # a revoked key
        reviewer = routed(clock, ("primary", primary), ("backup", backup))
        report = await reviewer.review("doc", document(5))
        assert report["deployments"] == ["backup"] * 5
        breaker = reviewer.routes["primary"].breaker
        assert breaker.view().state is BreakerState.open  # each refusal recorded: min_calls opened it
        assert chats(primary) == POLICY.min_calls  # then passed over
        await reviewer.close()


def test_a_chunk_every_deployment_refuses_is_a_refusal_and_one_refused_one_down_is_the_providers():
    run(_refused_everywhere)


async def _refused_everywhere(clock: ManualClock) -> None:
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = routed(clock, ("first", first), ("second", second))
        first.script(error(403, "blocked by a content filter"))
        second.script(error(403, "blocked by a content filter"))
        with pytest.raises(ConfigurationError, match="every LLM deployment refused the chunk"):
            await reviewer.review("doc", document(1))
        first.script(error(401, "revoked"))
        second.script(error(503, "busy"))
        with pytest.raises(ProviderUnavailable, match="every LLM deployment failed or refused the chunk"):
            await reviewer.review("doc", document(1))
        await reviewer.close()


@pytest.mark.parametrize("ending", ["refused", "invalid answer", "cancelled"])
def test_a_probe_reports_whatever_ends_it(ending):
    run(lambda clock: _probe_ends(clock, ending))


async def _probe_ends(clock: ManualClock, ending: str) -> None:
    with FakeLLM() as first, FakeLLM() as second:
        reviewer = routed(clock, ("first", first), ("second", second))
        breaker = reviewer.routes["first"].breaker
        for _ in range(POLICY.min_calls):
            breaker.record(False)
        clock.advance(POLICY.open_ms + 1000)
        assert breaker.view().state is BreakerState.half_open
        if ending == "refused":
            first.script(error(401, "revoked"))
        elif ending == "invalid answer":
            first.script(Reply(content="not a report"), Reply(content="still not a report"))
        else:
            first.script(Reply(content="{}", delay=3.0))
        review = asyncio.create_task(reviewer.review("doc", document(1)))
        if ending == "cancelled":
            while chats(first) == 0:
                await asyncio.sleep(0.01)
            review.cancel()
        try:
            await review
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the ending under test; the breaker says the rest
            pass
        # The probe lease is free again at once, never held until it runs out: the deployment is
        # closed (it answered) or open for one more interval (it did not).
        view = breaker.view()
        expected = BreakerState.closed if ending == "invalid answer" else BreakerState.open
        assert view.state is expected, (ending, view)
        clock.advance(POLICY.open_ms + 1000)
        assert ending == "invalid answer" or breaker.try_probe("another process")
        await reviewer.close()
