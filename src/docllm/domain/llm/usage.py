"""What the LLM cost: one call (``LlmCall``), an attempt's or a task's sum (``Usage``), and the
meter an attempt carries while its review runs.

The reviewer reports each call with ``record``; ``TaskProcessor.review`` runs the review inside
``metering(attempt.meter)``. A context variable rather than an argument of the port: the chunk
requests of one review run as tasks of their own and inherit it, and every reviewer (fakes, the
simulation's) keeps the port's two-argument ``review``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

OUTCOMES = ("ok", "error", "cancelled")  # of one call: answered, failed, cancelled in flight (I11)


@dataclass(frozen=True)
class LlmCall:
    model: str
    outcome: str  # one of OUTCOMES
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None: the price table has no price for the model
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    deployment: str | None = None  # the LLM deployment that served it (its spend is counted there)


@dataclass(frozen=True)
class Usage:
    """A sum of calls. ``cost_usd`` is None while none of them had a price; ``model`` is the last."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    model: str | None = None
    cost_usd: float | None = None
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache

    def __add__(self, other: Usage) -> Usage:
        """The same sum the SQL repository computes in its UPDATE (``coalesce(col + x, col, x)``)."""
        cost = other.cost_usd if self.cost_usd is None else self.cost_usd + (other.cost_usd or 0.0)
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            llm_seconds=self.llm_seconds + other.llm_seconds,
            model=other.model or self.model,
            cost_usd=cost,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )

    @classmethod
    def of(cls, call: LlmCall) -> Usage:
        return cls(
            1, call.prompt_tokens, call.completion_tokens, call.seconds, call.model, call.cost_usd, call.cached_tokens
        )


class UsageMeter:
    """The running sum of one attempt (the event loop's single thread adds to it), and the time
    its requests were held back by the fleet's limits or a provider's hold: not the document's
    time, so not counted against its runtime bound (I12)."""

    def __init__(self) -> None:
        self.total = Usage()
        self.cost_by_deployment: dict[str, float] = {}  # USD of the priced calls, per deployment that served them
        self.held_s = 0.0  # closed spans during which at least one request of the attempt waited
        self._waiters = 0
        self._held_since = 0.0

    def add(self, call: LlmCall) -> None:
        self.total = self.total + Usage.of(call)
        if call.deployment is not None and call.cost_usd:
            self.cost_by_deployment[call.deployment] = self.cost_by_deployment.get(call.deployment, 0.0) + call.cost_usd

    def waited(self, now: float) -> float:
        """Seconds held so far, the span still open included (``now``: the event loop's time)."""
        return self.held_s + (now - self._held_since if self._waiters else 0.0)

    def hold(self, now: float) -> None:
        if self._waiters == 0:
            self._held_since = now
        self._waiters += 1

    def release(self, now: float) -> None:
        self._waiters -= 1
        if self._waiters == 0:
            self.held_s += now - self._held_since


_current: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar("docllm_usage_meter", default=None)


@contextmanager
def metering(meter: UsageMeter) -> Iterator[UsageMeter]:
    """Calls recorded inside (and in tasks created inside) add to ``meter``."""
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


@contextmanager
def held(now: Callable[[], float]) -> Iterator[None]:
    """The running attempt's request waits inside (for its turn, or a provider's hold)."""
    meter = _current.get()
    if meter is None:
        yield
        return
    meter.hold(now())
    try:
        yield
    finally:
        meter.release(now())


def record(call: LlmCall) -> None:
    """Add a call to the running attempt's meter; outside an attempt (a probe, a test) it is not kept."""
    meter = _current.get()
    if meter is not None:
        meter.add(call)
