"""How one attempt ended, before it is written down."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class OutcomeKind(enum.Enum):
    success = "success"
    retryable = "retryable"  # counts against the attempt budget, retried with backoff
    permanent = "permanent"  # the task fails now
    release = "release"  # not the task's fault (shutdown, misconfiguration): back to ready, budget kept


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    report: dict[str, Any] | None = None
    error: str | None = None
    retry_after: float | None = None

    @classmethod
    def success(cls, report: dict[str, Any]) -> Outcome:
        return cls(OutcomeKind.success, report=report)

    @classmethod
    def retryable(cls, error: str, retry_after: float | None = None) -> Outcome:
        return cls(OutcomeKind.retryable, error=error, retry_after=retry_after)

    @classmethod
    def permanent(cls, error: str) -> Outcome:
        return cls(OutcomeKind.permanent, error=error)

    @classmethod
    def release(cls, reason: str) -> Outcome:
        return cls(OutcomeKind.release, error=reason)
