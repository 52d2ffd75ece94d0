"""The fleet's LLM circuit breaker as the domain sees it (ARCHITECTURE.md, LLM boundary): its settings and
what one look at it returns. The decisions are the adapter's (one Lua script on the Redis clock;
an in-memory twin for tests and the simulation), held to the same contract tests."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class BreakerState(enum.StrEnum):
    closed = "closed"  # calls flow; outcomes are counted in the window
    open = "open"  # most recent calls failed for provider reasons: nobody claims
    half_open = "half_open"  # open for the open interval: one probe at a time may test the provider


@dataclass(frozen=True)
class BreakerPolicy:
    """DOCLLM_BREAKER_*: the window outcomes are counted in, the failure ratio (of at least
    ``min_calls`` calls) that opens it, and how long it stays open before each probe."""

    window_seconds: float = 60.0
    failure_ratio: float = 0.5
    min_calls: int = 5
    open_seconds: float = 30.0

    @property
    def window_ms(self) -> int:
        return int(self.window_seconds * 1000)

    @property
    def open_ms(self) -> int:
        return int(self.open_seconds * 1000)


@dataclass(frozen=True)
class BreakerView:
    """The breaker as one call left it. Times are the authority's (Redis) milliseconds.

    ``changed`` names the transition this call made ("opened", "closed", "probing", "reopened"),
    so that exactly one process logs and counts each transition."""

    state: BreakerState
    now_ms: int
    calls: int = 0  # outcomes in the window
    failures: int = 0
    opened_at_ms: int | None = None  # while open or half-open: since when
    probe_at_ms: int | None = None  # while open: when the next probe may start
    last_ok_ms: int | None = None  # the latest success recorded
    transitions: int = 0
    open_ms_total: int = 0  # time spent open before the current opening
    changed: str = ""

    @property
    def claims(self) -> bool:
        return self.state is BreakerState.closed

    def open_seconds_now(self) -> float:
        """How long it has been open (0 while closed)."""
        return 0.0 if self.opened_at_ms is None else max(0, self.now_ms - self.opened_at_ms) / 1000

    def open_seconds_total(self) -> float:
        return self.open_ms_total / 1000 + self.open_seconds_now()
