"""Capped exponential backoff: the one schedule every "try again later" loop uses (outages of
Redis or the database, the LLM configuration gate, writing an attempt's outcome, SQL retries)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    base: float = 0.5
    cap: float = 15.0
    factor: float = 2.0
    failures: int = 0

    def next(self) -> float:
        """Record one more failure; returns how long to wait before the next try."""
        delay = min(self.cap, self.base * self.factor ** min(self.failures, 60))
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0
