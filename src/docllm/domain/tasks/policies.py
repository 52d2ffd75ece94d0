"""Retry and lease policies: plain numbers and the arithmetic on them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from docllm.domain.backoff import capped_delay, jittered


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with capped exponential backoff and jitter (D6)."""

    max_attempts: int = 5
    max_handbacks: int = 3  # uncharged hand-backs per task while the provider serves others (I12)
    base_seconds: float = 2.0
    cap_seconds: float = 300.0
    jitter: float = 0.5  # the delay is drawn from [d * (1 - jitter), d]
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay_seconds(self, failed_attempts: int, retry_after: float | None = None) -> float:
        """Delay before the next attempt after ``failed_attempts`` failures (1 for the first)."""
        delay = jittered(self._unjittered(failed_attempts), self.jitter, self.rng.random())
        if retry_after is not None:
            delay = max(delay, min(float(retry_after), self.cap_seconds))
        return delay

    def max_total_backoff(self) -> float:
        """Upper bound of all delays one task can accumulate (used by liveness bounds, I2): its
        charged attempts' and its counted hand-backs' (they back off the same way)."""
        return sum(
            self._unjittered(n) for count in (self.max_attempts, self.max_handbacks) for n in range(1, count + 1)
        )

    def _unjittered(self, failed_attempts: int) -> float:
        return capped_delay(self.base_seconds, self.cap_seconds, failed_attempts - 1)


@dataclass(frozen=True)
class LeasePolicy:
    """How long a lease lasts, how often a live worker renews it, and how long an attempt may run."""

    lease_seconds: float = 30.0
    max_runtime_seconds: float = 600.0  # PROCESSING_TIMEOUT_SECONDS
    reaper_interval_seconds: float = 5.0

    @property
    def heartbeat_seconds(self) -> float:
        return self.lease_seconds / 3.0

    @property
    def lease_ms(self) -> int:
        return int(self.lease_seconds * 1000)

    def stuck_bound_seconds(self, margin: float = 1.0) -> float:
        """I1: how long a task may stay processing after its worker stopped heartbeating, while a
        reaper runs that started at least half a lease ago (its first verdict waits that long:
        ARCHITECTURE.md, Clocks); after a restart of every reaper, half a lease more."""
        return self.lease_seconds + self.reaper_interval_seconds + margin


@dataclass(frozen=True)
class Limits:
    """The largest payload a claimer parses and the largest document it reviews."""

    max_payload_bytes: int = 64 * 1024
    max_document_bytes: int = 5 * 1024 * 1024
