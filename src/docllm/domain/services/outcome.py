"""How one attempt ended, before it is written down."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

# The row's error of a cancelled task. Its status is ``failed``: the original deployment's table
# has an ENUM of the four statuses, and its producers know no other (README, "docllm cancel").
CANCELLED_ERROR = "cancelled by operator"


class OutcomeKind(enum.Enum):
    success = "success"
    retryable = "retryable"  # counts against the attempt budget, retried with backoff
    permanent = "permanent"  # the task fails now
    release = "release"  # not the task's fault (shutdown, misconfiguration): back to ready, budget kept
    cancelled = "cancelled"  # the operator cancelled the task: it fails, and is not dead-lettered


# A row ``processing`` under an attempt whose lease is gone (its start landed, its answer was lost).
ORPHANED_REASON = "its attempt had no lease left: handed back without charging an attempt"


class Reason(enum.StrEnum):
    """Why an attempt or a delivery did not succeed, as one of a few values: the ``reason`` field
    of events and the ``reason`` label of metrics (a label must not carry task ids or messages).
    The message next to it (``error``) is for people and may say anything."""

    transient_error = "transient_error"  # the reviewer raised TransientError (LLM 429/5xx, timeout)
    unavailable = "unavailable"  # ... its subclass: Redis or the database could not be reached
    permanent_error = "permanent_error"  # the reviewer raised PermanentError
    reviewer_bug = "reviewer_bug"  # the reviewer raised anything else
    invalid_document = "invalid_document"  # empty, or over the size limit
    timeout = "timeout"  # PROCESSING_TIMEOUT_SECONDS
    attempts_exhausted = "attempts_exhausted"
    shutdown = "shutdown"
    lease_lost = "lease_lost"  # the worker found its lease gone and handed the row back
    llm_configuration = "llm_configuration"
    refused_document = "refused_document"  # a 401/403/404 for one document while the configuration works
    malformed_payload = "malformed_payload"
    unknown_task = "unknown_task"
    row_deleted = "row_deleted"
    lease_expired = "lease_expired"  # the reaper reclaimed an attempt whose worker stopped
    never_started = "never_started"  # the reaper requeued a claim that never started
    orphaned = "orphaned"  # a row processing under an attempt without a lease, handed back uncharged
    task_failed = "task_failed"  # the reaper found the row already failed (its worker died after)
    unsettled = "unsettled"  # the reaper could not settle a lease (an unexpected error)
    cancelled = "cancelled"  # an operator's ``docllm cancel``
    other = "other"


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    report: dict[str, Any] | None = None
    error: str | None = None
    retry_after: float | None = None
    reason: Reason | None = None  # None for a success

    @classmethod
    def success(cls, report: dict[str, Any]) -> Outcome:
        return cls(OutcomeKind.success, report=report)

    @classmethod
    def retryable(
        cls, error: str, retry_after: float | None = None, reason: Reason = Reason.transient_error
    ) -> Outcome:
        return cls(OutcomeKind.retryable, error=error, retry_after=retry_after, reason=reason)

    @classmethod
    def permanent(cls, error: str, reason: Reason = Reason.permanent_error) -> Outcome:
        return cls(OutcomeKind.permanent, error=error, reason=reason)

    @classmethod
    def release(cls, error: str, reason: Reason = Reason.other) -> Outcome:
        return cls(OutcomeKind.release, error=error, reason=reason)

    # The outcomes a runtime decides on its own (the simulation's and production's say the same).
    @classmethod
    def crashed(cls, exc: BaseException) -> Outcome:
        """The review raised past ``TaskProcessor.review``: it costs an attempt."""
        return cls.retryable(f"{type(exc).__name__}: {exc}", reason=Reason.reviewer_bug)

    @classmethod
    def timed_out(cls, limit_seconds: float) -> Outcome:
        return cls.retryable(f"attempt exceeded PROCESSING_TIMEOUT_SECONDS={limit_seconds:g}", reason=Reason.timeout)

    @classmethod
    def shut_down(cls) -> Outcome:
        return cls.release("worker shut down before the attempt finished", Reason.shutdown)

    @classmethod
    def refused(cls, error: Exception) -> Outcome:
        """A configuration error for one document (a content-filtering gateway's 403) while the
        configuration itself works: the document's, so it costs an attempt (issue 13 item 4)."""
        return cls.retryable(f"the LLM refused this document: {error}", reason=Reason.refused_document)

    @classmethod
    def cancelled(cls) -> Outcome:
        return cls(OutcomeKind.cancelled, error=CANCELLED_ERROR, reason=Reason.cancelled)

    @classmethod
    def misconfigured(cls, error: Exception) -> Outcome:
        return cls.release(f"LLM configuration error: {error}", Reason.llm_configuration)
