"""Rate limits apart from Redis: the provider's headers, the settings, the gate's waiting and the
container's wiring."""

from __future__ import annotations

import asyncio
import email.utils

import fakeredis
import pytest
from dependency_injector import providers

from docllm.adapters.llm.provider_hints import duration_seconds, hints_from_headers, retry_after_seconds
from docllm.adapters.redis.rate_limiter import RedisRateLimiter
from docllm.container import Container
from docllm.domain.errors import Unavailable
from docllm.domain.llm.rate_gate import RateGate
from docllm.domain.llm.rate_limits import COMPLETION_ESTIMATE_TOKENS, PACE, ProviderHints, estimate_tokens
from docllm.settings import Settings, SettingsError
from sim.manual_clock import ManualClock
from tests.support.memory.rate_limiter import InMemoryRateLimiter

try:  # what the openai client's responses carry (openai 3 moved to httpx2)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the openai version installed
    import httpx  # type: ignore[no-redef, import-not-found, unused-ignore]


@pytest.mark.parametrize(
    "raw, seconds",
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0.5", 0.5),
        ("12", 12.0),
        ("", None),
        (None, None),
        ("soon", None),
        ("5 minutes", None),
        ("1s junk", None),
    ],
)
def test_reset_durations_in_the_providers_formats(raw, seconds):
    assert duration_seconds(raw) == (None if seconds is None else pytest.approx(seconds))


def test_retry_after_prefers_milliseconds_then_seconds_then_a_date():
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "1500", "retry-after": "7"})) == 1.5
    assert retry_after_seconds(httpx.Headers({"Retry-After": "7"})) == 7.0
    when = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_seconds(httpx.Headers({"Retry-After": when}), now=1_000_000) == pytest.approx(30)
    assert retry_after_seconds(httpx.Headers({"Retry-After": "whenever"})) is None
    assert retry_after_seconds(httpx.Headers({})) is None


def test_hints_from_openai_style_headers():
    headers = httpx.Headers(
        {
            "X-RateLimit-Remaining-Requests": "59",
            "x-ratelimit-remaining-tokens": "149984",
            "x-ratelimit-reset-requests": "1s",
            "x-ratelimit-reset-tokens": "6m0s",
            "retry-after-ms": "250",
        }
    )
    assert hints_from_headers(headers) == ProviderHints(59, 149984, 1.0, 360.0, 0.25, None, None)
    limits = httpx.Headers({"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000"})
    assert (hints_from_headers(limits).limit_requests, hints_from_headers(limits).limit_tokens) == (60, 150000)
    assert not hints_from_headers(httpx.Headers({"content-type": "application/json"}))
    assert not hints_from_headers(None)
    assert hints_from_headers(httpx.Headers({"x-ratelimit-remaining-requests": "lots"})).remaining_requests is None


def test_a_request_is_estimated_at_its_prompt_and_a_completion():
    messages = [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "y" * 4000}]
    assert estimate_tokens(messages) == 100 + 4 + 1000 + 4 + COMPLETION_ESTIMATE_TOKENS


@pytest.mark.parametrize("var", ["DOCLLM_LLM_RPM", "DOCLLM_LLM_TPM"])
@pytest.mark.parametrize("value", ["0", "-3", "fast", "1.5"])
def test_a_bad_limit_stops_the_start_naming_it(var, value):
    with pytest.raises(SettingsError, match=var):
        Settings.from_env({var: value})


def test_limits_are_off_unless_set():
    s = Settings.from_env({})
    assert (s.llm_rpm, s.llm_tpm) == (None, None)
    s = Settings.from_env({"DOCLLM_LLM_RPM": "120", "DOCLLM_LLM_TPM": "90000"})
    assert (s.llm_rpm, s.llm_tpm) == (120, 90000)


def _container(**env: str) -> Container:
    c = Container()
    base = {"DOCLLM_LLM_PROVIDER": "openai", "DOCLLM_LLM_API_KEY": "k", "DOCLLM_QUEUE_PREFIX": "{q}"}
    c.settings.override(providers.Object(Settings.from_env(base | env)))
    c.redis_client.override(providers.Object(fakeredis.FakeRedis()))
    c.clock.override(providers.Object(ManualClock()))
    return c


def test_the_container_builds_the_limiter_only_when_a_limit_is_set():
    assert _container().rate_gate() is None
    limiter = _container(DOCLLM_LLM_TPM="1000").rate_limiter()
    assert isinstance(limiter, RedisRateLimiter) and limiter.key.startswith("{q}:llm:limit:")
    c = _container(DOCLLM_LLM_RPM="60")
    assert c.reviewer()._gate is c.rate_gate()


def _inline(fn, *args):  # the simulation's way: the port call runs on the loop itself
    async def call():
        return fn(*args)

    return call()


def test_the_gate_sleeps_until_its_turn_and_settles_the_answer(monkeypatch):
    clock = ManualClock()
    limiter = InMemoryRateLimiter(clock, rpm=60, tpm=60_000)
    waits: list[float] = []
    gate = RateGate(limiter, run=_inline, on_wait=waits.append)
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:  # time passes on the authority clock only
        slept.append(seconds)
        clock.advance(seconds * 1000)
        await real_sleep(0)

    async def two_requests() -> None:
        for _ in range(2):
            async with gate.request(1500) as ticket:
                ticket.used, ticket.hints = 500, ProviderHints(retry_after_s=0.25)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    asyncio.run(two_requests())
    assert slept == [pytest.approx(1 / PACE, abs=0.001)]  # about one a second; the second waited its turn
    assert len(waits) == 2
    assert limiter.headroom()["hold_s"] == 0.25


def test_a_cancelled_wait_charges_nothing_and_a_failed_request_still_tightens():
    clock = ManualClock()
    limiter = InMemoryRateLimiter(clock, rpm=1)
    gate = RateGate(limiter, run=_inline)

    async def scenario() -> None:
        async with gate.request(1):
            pass
        waiting = asyncio.ensure_future(gate.request(1).__aenter__())
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        clock.advance(62_000)
        with pytest.raises(RuntimeError):
            async with gate.request(1) as ticket:
                ticket.hints = ProviderHints(retry_after_s=9)
                raise RuntimeError("429")

    asyncio.run(scenario())
    assert limiter.headroom()["hold_s"] == 9.0
    assert limiter.headroom()["requests_available"] == 0  # the failed one was charged, the cancelled one not
    clock.advance(62_000)
    assert limiter.headroom()["requests_available"] == 1


def test_an_answer_stands_when_the_limiter_cannot_take_its_correction():
    class Unreachable(InMemoryRateLimiter):
        def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
            raise Unavailable("redis is down")

    gate = RateGate(Unreachable(ManualClock(), rpm=60), run=_inline)

    async def answered() -> str:
        async with gate.request(100) as ticket:
            ticket.used, ticket.hints = 50, ProviderHints(retry_after_s=1)
            return "the report"

    assert asyncio.run(answered()) == "the report"
