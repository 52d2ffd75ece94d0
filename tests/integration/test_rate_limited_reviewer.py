"""OpenAIReviewer under the fleet's rate limits, over HTTP against the scripted server: the
provider's headers reach the shared limiter, on success and on 429, and the usage an answer
reports corrects the estimate it was charged."""

from __future__ import annotations

import asyncio

import fakeredis
import pytest

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.redis.rate_limiter import RedisRateLimiter
from docllm.domain.errors import TransientError
from docllm.domain.llm.rate_gate import RateGate
from docllm.domain.llm.rate_limits import PACE
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, Reply, error

DOC = "# Install guide\n\nRun the installer.\n"


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


def _pair(llm: FakeLLM, **limits: int) -> tuple[OpenAIReviewer, RedisRateLimiter, RedisRateLimiter]:
    """A reviewer whose gate is one worker's limiter, and another worker's limiter on the same key."""
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    clock = ManualClock()  # time stands still: the waits the headers set are read back as set

    def limiter() -> RedisRateLimiter:
        return RedisRateLimiter(client, "{q}", clock, llm.base_url, "test-model", limits.get("rpm"), limits.get("tpm"))

    mine = limiter()
    return OpenAIReviewer(llm.base_url, "k", "test-model", 2.0, gate=RateGate(mine)), mine, limiter()


def test_success_headers_tighten_the_limit_for_every_worker(llm):
    reviewer, _, other = _pair(llm, rpm=1000)
    llm.script(Reply(headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s"}))
    asyncio.run(reviewer.review("install", DOC))
    view = other.headroom()
    assert (view["provider_remaining_requests"], round(view["provider_reset_s"])) == (0, 30)
    assert other.acquire(1) == pytest.approx(30, abs=1)


def test_a_429s_retry_after_holds_every_worker(llm):
    reviewer, _, other = _pair(llm, rpm=1000)
    llm.script(error(429, "Rate limit reached.", retry_after_ms="20000"))
    with pytest.raises(TransientError, match="429"):
        asyncio.run(reviewer.review("install", DOC))
    assert other.headroom()["hold_s"] == pytest.approx(20, abs=1)
    assert other.acquire(1) == pytest.approx(20, abs=1)


def test_the_usage_an_answer_reports_corrects_the_estimate(llm):
    reviewer, mine, _ = _pair(llm, tpm=600_000)  # 10 tokens per ms: the bucket holds 10,000 tokens
    report = asyncio.run(reviewer.review("install", DOC))
    used = report["usage"]["prompt_tokens"] + report["usage"]["completion_tokens"]
    [request] = llm.requests
    assert used < 1000  # the estimate included 1,000 for the completion
    available = mine.headroom()["tokens_available"]
    full = int(10_000 * PACE)  # the fleet paces itself at PACE of the limit: a second's worth of that
    assert full - used - 100 <= available <= full, (available, used)  # charged what it used, not more
