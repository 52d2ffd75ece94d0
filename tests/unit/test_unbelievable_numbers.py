"""Numbers a provider sends beyond belief (NaN, inf, negative, absurdly large) are ignored with one
warning per header, and the rate gate never takes a strange wait for its turn (issue 22)."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from docllm.adapters.llm import provider_hints
from docllm.adapters.llm.provider_hints import hints_from_headers, retry_after_seconds
from docllm.domain.llm.rate_gate import MAX_SLEEP_S, RateGate
from docllm.domain.llm.rate_limits import ProviderHints

try:  # what the openai client's responses carry (openai 3 moved to httpx2)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the openai version installed
    import httpx  # type: ignore[no-redef, import-not-found, unused-ignore]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test sees the once-per-process warnings afresh."""
    monkeypatch.setattr(provider_hints, "_warned", set())


@pytest.mark.parametrize(
    "header, value, field",
    [
        ("Retry-After", "1e20", "retry_after_s"),
        ("Retry-After", "inf", "retry_after_s"),
        ("Retry-After", "nan", "retry_after_s"),
        ("Retry-After", "-5", "retry_after_s"),
        ("Retry-After", "99999999999999999", "retry_after_s"),
        ("Retry-After", "3601", "retry_after_s"),  # just past an hour
        ("retry-after-ms", "1e300", "retry_after_s"),
        ("x-ratelimit-remaining-tokens", "1e30", "remaining_tokens"),
        ("x-ratelimit-remaining-requests", "inf", "remaining_requests"),
        ("x-ratelimit-limit-tokens", "-1", "limit_tokens"),
        ("x-ratelimit-reset-requests", "99999999h", "reset_requests_s"),
        ("x-ratelimit-reset-tokens", "1e400", "reset_tokens_s"),
    ],
)
def test_a_number_beyond_belief_is_ignored_with_a_warning(caplog, header, value, field):
    with caplog.at_level(logging.WARNING, logger=provider_hints.__name__):
        hints = hints_from_headers(httpx.Headers({header: value}))
    assert getattr(hints, field) is None
    assert not hints
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert header.lower() in caplog.text and value in caplog.text


def test_the_warning_comes_once_per_header_name(caplog):
    with caplog.at_level(logging.WARNING, logger=provider_hints.__name__):
        for _ in range(3):
            hints_from_headers(httpx.Headers({"Retry-After": "inf", "x-ratelimit-remaining-tokens": "1e30"}))
    assert len(caplog.records) == 2


def test_sane_values_still_parse(caplog):
    headers = httpx.Headers(
        {
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-remaining-tokens": "149984",
            "x-ratelimit-reset-requests": "23h59m",
            "x-ratelimit-reset-tokens": "6m0s",
            "retry-after": "3600",
        }
    )
    with caplog.at_level(logging.WARNING):
        assert hints_from_headers(headers) == ProviderHints(0, 149984, 86340.0, 360.0, 3600.0, 10000, None)
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "1e300", "retry-after": "2"})) == 2.0
    assert retry_after_seconds(httpx.Headers({"retry-after": "0"})) == 0.0
    assert not caplog.records or all("retry-after-ms" in r.getMessage() for r in caplog.records)


def test_a_retry_after_date_further_than_an_hour_is_ignored():
    far = "Fri, 01 Jan 2100 00:00:00 GMT"
    assert retry_after_seconds(httpx.Headers({"Retry-After": far}), now=1_000_000) is None


class Strange:
    """A limiter whose first answers are what Redis made of a wait too big for its integers."""

    def __init__(self, *waits: float):
        self.waits = list(waits)

    def acquire(self, tokens: int) -> float:
        return self.waits.pop(0) if self.waits else 0.0

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        pass

    def headroom(self) -> dict:
        return {}


def test_the_gate_never_takes_a_strange_wait_for_its_turn(monkeypatch):
    async def inline(fn, *args):
        return fn(*args)

    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    async def one() -> None:
        async with RateGate(Strange(-9.2e15, math.nan, -math.inf, math.inf, 1e300, 0.25), run=inline).request(1):
            pass

    monkeypatch.setattr(asyncio, "sleep", sleep)
    asyncio.run(one())
    assert slept == [MAX_SLEEP_S] * 5 + [0.25]  # asked again later each time; never went at once
