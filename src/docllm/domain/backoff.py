"""Capped exponential backoff: the one schedule every "try again later" loop uses (outages of
Redis or the database, the LLM configuration gate, writing an attempt's outcome, SQL retries in
``sql_engine.TransientRetry``, a task's next attempt in ``RetryPolicy.delay_seconds``)."""

from __future__ import annotations

from dataclasses import dataclass

# Exponents past this are all the cap for any cap a caller could mean (2**60 times the base), and
# a float power of them would overflow.
_MAX_EXPONENT = 60


def capped_delay(base: float, cap: float, failures: int, factor: float = 2.0) -> float:
    """The wait after ``failures`` earlier failures (0 for the first wait): ``base * factor **
    failures``, at most ``cap``."""
    return min(cap, base * factor ** min(max(failures, 0), _MAX_EXPONENT))


def jittered(delay: float, jitter: float, draw: float) -> float:
    """``delay`` less up to ``jitter`` of it: ``draw`` from [0, 1) gives (delay * (1 - jitter), delay],
    and from (0, 1] gives [delay * (1 - jitter), delay)."""
    return delay * (1.0 - jitter * draw)


@dataclass
class Backoff:
    base: float = 0.5
    cap: float = 15.0
    factor: float = 2.0
    failures: int = 0

    def next(self) -> float:
        """Record one more failure; returns how long to wait before the next try."""
        delay = capped_delay(self.base, self.cap, self.failures, self.factor)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0
