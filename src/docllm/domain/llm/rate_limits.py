"""Fleet-wide LLM rate limits (ARCHITECTURE.md, LLM boundary): the arithmetic every limiter shares.

Two GCRA buckets on the authority clock, one for requests (``rpm``) and one for tokens (``tpm``):
each keeps a theoretical arrival time (TAT). The fleet is paced at ``PACE`` of the limit and a
bucket holds one second of it (at least one request), so in any 60 s window it sends at most 97%
of the limit plus one second's worth (or the one request bigger than that): under the limit for
a provider's sliding or refilling window alike.
The provider's own answers tighten this for everyone (``ProviderHints``): a ``Retry-After``
holds every worker back, and its remaining budget is shared until its reset: refilled in a straight
line towards the limit when the provider names it (OpenAI's buckets refill continuously), else
only at the reset (a fixed window).

Every number from outside (a header, a reported usage, a caller's settle) is believed only within
the bounds below, else ignored, and a stored time further ahead than ``HORIZON_MS`` is forgotten:
past them PEXPIRE fails and a wait overflows Redis's integers into one read as "go now".

The authority's clock can step back (ARCHITECTURE.md, Clocks): the state remembers the latest time
a call brought (``seen``) and a call further behind it than ``STEP_BACK_MS`` moves every stored time
by the step (``_on_this_clock``).

``decide`` and ``correct`` are the reference: ``adapters/redis/lua/rate_limit.lua`` does the same in
Redis, and the contract tests hold the two to each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

MINUTE_MS = 60_000.0
# The fleet paces itself a little under the limit: the limiter's clock, the provider's and the
# network between them differ by a little, and a provider counting over a strict sliding window
# would refuse what a bucket's burst adds. (lua/rate_limit.lua uses the same number.)
PACE = 0.97
# What a request's answer is assumed to cost before it is known (the requests set no max_tokens);
# the usage the answer reports corrects it.
COMPLETION_ESTIMATE_TOKENS = 1000
CHARS_PER_TOKEN = 4

# The bounds (lua/rate_limit.lua repeats them):
MAX_RETRY_AFTER_S = 3600.0  # a provider that wants more than an hour's pause is broken, not limiting
MAX_RESET_S = 86_400.0  # rate-limit windows run from a second to a day
MAX_COUNT = 10**9  # no limit, remaining budget, request or answer is a billion requests or tokens
HORIZON_MS = MAX_RESET_S * 1000  # the longest wait acquire names, and the furthest stored time believed
# A call whose time is more than this behind the latest one seen comes after a backward step of the
# authority's clock: every stored time moves back by the step, so each keeps its meaning (a wait is as
# long as it was at the last call before the step; clamping to a furthest legitimate time would lose
# that: it lengthens a hold and fills an empty bucket). Not on any smaller difference: the fleet's
# processes read the authority a few ms apart, and moving the state back for each of those would give
# the laggard that much more room at every call, so the fleet would drift past its limit; a caller
# that little behind the latest only waits that much longer. As clamp.lua's slack.
STEP_BACK_MS = 1000.0

N = TypeVar("N", int, float)


def believed(value: N | None, high: float) -> N | None:
    """``value`` when from 0 to ``high``; None for anything else (NaN, inf, negative, too big)."""
    return value if value is not None and 0 <= value <= high else None


def estimate_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    """Prompt tokens (about four characters each, plus a few per message) and the completion."""
    prompt = sum(len(str(m.get("content") or "")) // CHARS_PER_TOKEN + 4 for m in messages)
    return prompt + COMPLETION_ESTIMATE_TOKENS


@dataclass(frozen=True)
class ProviderHints:
    """What one answer of the provider said about its limits; None where it said nothing."""

    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests_s: float | None = None
    reset_tokens_s: float | None = None
    retry_after_s: float | None = None
    limit_requests: int | None = None
    limit_tokens: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in vars(self).values())


@dataclass(frozen=True)
class LimitState:
    """One key's state, every time in authority milliseconds (0: never set)."""

    requests_tat: float = 0.0
    tokens_tat: float = 0.0
    hold_until: float = 0.0  # Retry-After: nobody sends before this
    provider_requests: Budget | None = None
    provider_tokens: Budget | None = None
    seen: float = 0.0  # the latest authority time a call brought (0: none yet)


@dataclass(frozen=True)
class Budget:
    """What the provider said remains (at ``seen``, less what was sent since), refilling at
    ``rate`` per ms until ``reset``, when it no longer binds."""

    remaining: float
    seen: float
    rate: float
    reset: float

    def available(self, now: float) -> float:
        return self.remaining + self.rate * (now - self.seen)

    def wait(self, now: float, need: float) -> float:
        short = need - self.available(now)
        if self.reset <= now or short <= 0:
            return 0.0
        return min(short / self.rate, self.reset - now) if self.rate > 0 else self.reset - now

    @staticmethod
    def said(now: float, remaining: int, reset_s: float, limit: int | None) -> Budget:
        reset_ms = reset_s * 1000
        rate = (limit - remaining) / reset_ms if limit is not None and limit > remaining and reset_ms > 0 else 0.0
        return Budget(float(remaining), now, rate, now + reset_ms)


def _intervals(rpm: int, tpm: int) -> tuple[float, float, float, float]:
    """(ms per request, request tolerance, ms per token, token tolerance); 0 where off."""
    request_ms = MINUTE_MS / (rpm * PACE) if rpm > 0 else 0.0
    token_ms = MINUTE_MS / (tpm * PACE) if tpm > 0 else 0.0
    return request_ms, request_ms * max(1.0, rpm / 60.0), token_ms, 1000.0 if tpm > 0 else 0.0


def _on_this_clock(state: LimitState, now: float) -> LimitState:
    """The state on ``now``'s clock: moved back by a backward step (``STEP_BACK_MS``), ``seen`` brought
    up to ``now``. A ``seen`` beyond belief (NaN, negative, past ``HORIZON_MS`` ahead) is not a step."""
    seen = believed(state.seen, now + HORIZON_MS)
    if seen is not None and now < seen - STEP_BACK_MS:
        shift = now - seen

        def moved(budget: Budget | None) -> Budget | None:
            return None if budget is None else replace(budget, seen=budget.seen + shift, reset=budget.reset + shift)

        state = replace(
            state,
            requests_tat=state.requests_tat + shift,
            tokens_tat=state.tokens_tat + shift,
            hold_until=state.hold_until + shift,
            provider_requests=moved(state.provider_requests),
            provider_tokens=moved(state.provider_tokens),
        )
        seen = now
    return replace(state, seen=max(seen or 0.0, now))


def _believable(state: LimitState, now: float) -> LimitState:
    """The state without the times no settle stores now (an older script stored them unchecked)."""

    def ok(t: float) -> bool:
        return t <= now + HORIZON_MS  # False for NaN too

    pr, pt = state.provider_requests, state.provider_tokens
    return replace(
        state,
        requests_tat=state.requests_tat if ok(state.requests_tat) else 0.0,
        tokens_tat=state.tokens_tat if ok(state.tokens_tat) else 0.0,
        hold_until=state.hold_until if ok(state.hold_until) else 0.0,
        provider_requests=pr if pr is not None and ok(pr.reset) else None,
        provider_tokens=pt if pt is not None and ok(pt.reset) else None,
    )


def decide(state: LimitState, now: float, rpm: int, tpm: int, tokens: int) -> tuple[LimitState, int]:
    """Charge one request of ``tokens`` and return (new state, 0), or (the state, nothing charged, and
    the ms to wait, at most ``HORIZON_MS``). Either state is to be stored: it has seen ``now``."""
    state = _believable(_on_this_clock(state, now), now)
    tokens = min(tokens, MAX_COUNT) if tokens >= 0 else 0
    request_ms, request_tolerance, token_ms, token_tolerance = _intervals(rpm, tpm)
    wait = 0.0
    if state.hold_until > now:
        wait = state.hold_until - now
    if state.provider_requests is not None:
        wait = max(wait, state.provider_requests.wait(now, 1))
    if state.provider_tokens is not None:
        wait = max(wait, state.provider_tokens.wait(now, tokens))
    if request_ms:
        wait = max(wait, max(state.requests_tat, now) + request_ms - request_tolerance - now)
    cost = tokens * token_ms
    if token_ms:  # a request bigger than the bucket goes when the bucket is empty, and owes the rest
        wait = max(wait, max(state.tokens_tat, now) + min(cost, token_tolerance) - token_tolerance - now)
    if wait > 0:
        return state, math.ceil(min(wait, HORIZON_MS))
    return (
        replace(
            state,
            requests_tat=max(state.requests_tat, now) + request_ms if request_ms else state.requests_tat,
            tokens_tat=max(state.tokens_tat, now) + cost if token_ms else state.tokens_tat,
            provider_requests=_spend(state.provider_requests, 1),
            provider_tokens=_spend(state.provider_tokens, tokens),
        ),
        0,
    )


def correct(state: LimitState, now: float, tpm: int, delta_tokens: int, hints: ProviderHints) -> LimitState:
    """Charge ``delta_tokens`` more (fewer, when negative) than was charged, and take the hints;
    any number beyond the bounds is ignored."""
    state = _believable(_on_this_clock(state, now), now)
    token_ms = _intervals(0, tpm)[2]
    changes: dict[str, Any] = {}
    if token_ms and delta_tokens and believed(abs(delta_tokens), MAX_COUNT) is not None:
        changes["tokens_tat"] = max(state.tokens_tat + delta_tokens * token_ms, now)
    retry_after = believed(hints.retry_after_s, MAX_RETRY_AFTER_S)
    if retry_after is not None:
        changes["hold_until"] = max(state.hold_until, now + retry_after * 1000)
    for field, remaining, reset_s, limit in (
        ("provider_requests", hints.remaining_requests, hints.reset_requests_s, hints.limit_requests),
        ("provider_tokens", hints.remaining_tokens, hints.reset_tokens_s, hints.limit_tokens),
    ):
        remaining, reset_s = believed(remaining, MAX_COUNT), believed(reset_s, MAX_RESET_S)
        if remaining is not None and reset_s is not None:
            changes[field] = Budget.said(now, remaining, reset_s, believed(limit, MAX_COUNT))
    return replace(state, **changes)


def _spend(budget: Budget | None, amount: float) -> Budget | None:
    return None if budget is None else replace(budget, remaining=budget.remaining - amount)


def headroom(state: LimitState, now: float, rpm: int, tpm: int) -> dict[str, float | int | None]:
    """What a caller could send at ``now``: a flat view for ``docllm stats``."""
    state = _believable(_on_this_clock(state, now), now)
    request_ms, request_tolerance, token_ms, token_tolerance = _intervals(rpm, tpm)
    requests = tokens = None
    if request_ms:
        requests = max(0, math.floor((request_tolerance - (max(state.requests_tat, now) - now)) / request_ms))
    if token_ms:
        tokens = max(0, math.floor((token_tolerance - (max(state.tokens_tat, now) - now)) / token_ms))
    budgets = [b for b in (state.provider_requests, state.provider_tokens) if b is not None and b.reset > now]
    return {
        "rpm": rpm or None,
        "tpm": tpm or None,
        "requests_available": requests,
        "tokens_available": tokens,
        "hold_s": round(max(0.0, state.hold_until - now) / 1000, 3),
        "provider_remaining_requests": _live(state.provider_requests, now),
        "provider_remaining_tokens": _live(state.provider_tokens, now),
        "provider_reset_s": round((max(b.reset for b in budgets) - now) / 1000, 3) if budgets else None,
    }


def _live(budget: Budget | None, now: float) -> int | None:
    return None if budget is None or budget.reset <= now else math.floor(budget.available(now))
