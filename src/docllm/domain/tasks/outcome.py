"""How one attempt ended, before it is written down."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

# The row's error of a cancelled task. Its status is ``failed``: the original deployment's table
# has an ENUM of the four statuses, and its producers know no other (docs/CLI.md, "`docllm cancel`").
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

    transient_error = "transient_error"  # the reviewer raised TransientError (an invalid answer...)
    llm_unavailable = "llm_unavailable"  # a provider failure charged to the document (domain.tasks.verdict)
    unavailable = "unavailable"  # Redis or the database could not be reached: handed back uncharged
    permanent_error = "permanent_error"  # the reviewer raised PermanentError
    reviewer_bug = "reviewer_bug"  # the reviewer raised anything else
    invalid_document = "invalid_document"  # empty, or over the size limit
    timeout = "timeout"  # PROCESSING_TIMEOUT_SECONDS
    attempts_exhausted = "attempts_exhausted"
    shutdown = "shutdown"
    lease_lost = "lease_lost"  # the worker found its lease gone and handed the row back
    llm_configuration = "llm_configuration"
    llm_outage = "llm_outage"  # the LLM provider failed, not the document: handed back uncharged (I9)
    provider_failed = "provider_failed"  # one call failed while the provider answers: handed back, counted (I12)
    host_unreachable = "host_unreachable"  # this host cannot reach an LLM that serves others: handed back
    rate_limited = "rate_limited"  # waited on limits or provider holds past the runtime bound: handed back
    spend_cap = "spend_cap"  # the spend ledger refused its reservation (a daily cap): handed back uncharged
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
    unstorable_report = "unstorable_report"  # the store refused the report alone (not an outage): failed
    batch_returned = "batch_returned"  # a batch ended without its answer (failed, expired, lost): handed back, counted
    handbacks_exhausted = "handbacks_exhausted"  # a batch's end would count it past DOCLLM_MAX_HANDBACKS: failed
    to_realtime = "to_realtime"  # handed back by batches to its bound: the realtime lanes review it
    other = "other"


@dataclass(frozen=True)
class Outcome:
    """What an attempt writes. ``domain.tasks.verdict.decide`` makes every one but a success's."""

    kind: OutcomeKind
    report: dict[str, Any] | None = None
    error: str | None = None
    retry_after: float | None = None  # seconds: the provider's hint (a retry's or a hand-back's delay)
    reason: Reason | None = None  # None for a success
    counted: bool = False  # a hand-back that counts towards the task's bound (I12)

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
    def release(
        cls, error: str, reason: Reason = Reason.other, retry_after: float | None = None, counted: bool = False
    ) -> Outcome:
        return cls(OutcomeKind.release, error=error, reason=reason, retry_after=retry_after, counted=counted)

    @classmethod
    def crashed(cls, exc: BaseException) -> Outcome:
        """The review raised past ``TaskProcessor.review``: it costs an attempt."""
        return cls.retryable(f"{type(exc).__name__}: {exc}", reason=Reason.reviewer_bug)

    @classmethod
    def refused(cls, error: str) -> Outcome:
        """A 401/403/404 for one document while the provider answers this host: the document's
        (a content-filtering gateway's 403), so it costs an attempt."""
        return cls.retryable(f"the LLM refused this document: {error}", reason=Reason.refused_document)

    @classmethod
    def cancelled(cls) -> Outcome:
        return cls(OutcomeKind.cancelled, error=CANCELLED_ERROR, reason=Reason.cancelled)
