"""Whose fault it is: how every attempt ends, decided in one place (ARCHITECTURE.md, Whose fault it is, I9, I12).

``decide`` is a pure function from what happened (``Facts``) to the one ``Outcome`` the attempt
writes. Its verdicts, and who pays:

- commit: the provider answered with a valid report.
- charge (``retryable``): the document's fault. It counts an attempt, backs off, and the task is
  dead-lettered at its budget.
- hand back (``release``): not the document's fault: the provider's (an outage), this host's (it
  cannot reach a provider that serves others), our own (shutdown, lease loss, Redis or the
  database down, an attempt held by the fleet's limits or a provider's hold longer than its
  runtime bound: a wait is never the document's, I12; a reservation the spend ledger refused at
  a daily cap, I16). The row goes back to pending without
  using the budget. The hand-backs made while the provider demonstrably serves this host (it
  answers this host's own check: ``counted``) are bounded per task by ``max_handbacks``: past it
  the next such failure is charged (I12), so a poison document that fails every call together
  with others (opening the breaker) still ends ``failed``.
- fail now (``permanent``, ``cancelled``): nothing can help (an empty document, a permanent
  error), or the operator cancelled the task.

The runtime gathers the facts (``LlmGate.judge`` asks the fleet's breaker and this host's own
check) and writes the outcome (``TaskProcessor.finish``); it decides nothing itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from docllm.domain.errors import (
    ConfigurationError,
    OverCostCap,
    PermanentError,
    ProviderUnavailable,
    SpendCapReached,
    TransientError,
    Unavailable,
)
from docllm.domain.tasks.outcome import Outcome, Reason

SHUT_DOWN = "worker shut down before the attempt finished"
LEASE_LOST = "lease lost while running: handed back without charging an attempt"
STORE_DOWN = "Redis or the database failed the review, handed back uncharged"
WAITED = "waited on the LLM's rate limits or a provider's hold past PROCESSING_TIMEOUT_SECONDS, handed back uncharged"
HOST_CUT = "this host cannot reach the LLM while it serves others, handed back uncharged"


class Happened(enum.Enum):
    answered = "answered"  # the provider answered with a valid report
    invalid_answer = "invalid_answer"  # it answered, but not with a valid report (TransientError)
    permanent = "permanent"  # PermanentError: retrying cannot help
    invalid_document = "invalid_document"  # empty, or over the size limit: never sent
    reviewer_bug = "reviewer_bug"  # the reviewer raised something unexpected
    store_down = "store_down"  # Redis or the database could not be reached (Unavailable)
    provider_failed = "provider_failed"  # no answer: connection, timeout, 429, 5xx (ProviderUnavailable)
    refused = "refused"  # 401/403/404 (ConfigurationError): a bad key, or a filter refusing this document
    timed_out = "timed_out"  # ran past PROCESSING_TIMEOUT_SECONDS (waits on limits not counted)
    waited_too_long = "waited_too_long"  # waited on limits or provider holds longer than the runtime bound
    cancelled = "cancelled"  # the operator's cancel
    shutdown = "shutdown"  # the worker's shutdown grace ended
    lease_lost = "lease_lost"  # the heartbeat found the lease gone
    over_spend_cap = "over_spend_cap"  # the spend ledger refused its reservation: nothing was sent


# What the LLM gate must judge before ``decide`` can say whose fault it is.
JUDGED = frozenset({Happened.provider_failed, Happened.refused})


@dataclass(frozen=True)
class Facts:
    """What happened to one attempt, and what the LLM boundary saw around it."""

    happened: Happened
    error: str = ""
    retry_after: float | None = None  # the provider's hint, seconds
    handbacks: int = 0  # this task's counted hand-backs so far (the row's ``handbacks``)
    max_handbacks: int = 3
    limit_seconds: float = 0.0  # PROCESSING_TIMEOUT_SECONDS, for the message of a timeout
    # Filled in by the LLM gate for JUDGED failures:
    breaker_open: bool = False  # the fleet's breaker is (or became) open
    served_since: bool = False  # the provider answered another call after this failure
    host_ok: bool | None = None  # this host's own check right after the failure; None: not asked

    def judged(self, breaker_open: bool, served_since: bool, host_ok: bool | None) -> Facts:
        return replace(self, breaker_open=breaker_open, served_since=served_since, host_ok=host_ok)


def happened_of(exc: BaseException) -> Happened:
    """The kind of failure a review raised (the reviewer's errors are the domain's error tree)."""
    if isinstance(exc, ConfigurationError):
        return Happened.refused
    if isinstance(exc, Unavailable):
        return Happened.store_down
    if isinstance(exc, ProviderUnavailable):
        return Happened.provider_failed
    if isinstance(exc, TransientError):
        return Happened.invalid_answer
    if isinstance(exc, SpendCapReached):
        return Happened.over_spend_cap
    if isinstance(exc, OverCostCap):
        return Happened.invalid_document  # never sent: the provider did not serve it
    if isinstance(exc, PermanentError):
        return Happened.permanent
    return Happened.reviewer_bug


def facts_of(exc: BaseException, **context: object) -> Facts:
    retry_after = exc.retry_after if isinstance(exc, TransientError | SpendCapReached) else None
    error = str(exc) if isinstance(exc, PermanentError) else f"{type(exc).__name__}: {exc}"
    return Facts(happened_of(exc), error=error, retry_after=retry_after, **context)  # type: ignore[arg-type]


def decide(f: Facts) -> Outcome:
    """The one verdict for what happened (see the module's docstring)."""
    h = f.happened
    if h is Happened.cancelled:
        return Outcome.cancelled()
    if h in (Happened.permanent, Happened.invalid_document):
        return Outcome.permanent(
            f.error, Reason.invalid_document if h is Happened.invalid_document else Reason.permanent_error
        )
    if h is Happened.shutdown:
        return Outcome.release(SHUT_DOWN, Reason.shutdown)
    if h is Happened.lease_lost:
        return Outcome.release(LEASE_LOST, Reason.lease_lost)
    if h is Happened.store_down:  # ours (I9): the budget is the document's, not Redis's or the database's
        return Outcome.release(
            f"Redis or the database failed the review, handed back uncharged: {f.error}", Reason.unavailable
        )
    if h is Happened.timed_out:
        return Outcome.retryable(
            f"attempt exceeded PROCESSING_TIMEOUT_SECONDS={f.limit_seconds:g}", reason=Reason.timeout
        )
    if h is Happened.invalid_answer:
        return Outcome.retryable(f.error, f.retry_after, Reason.transient_error)
    if h is Happened.reviewer_bug:
        return Outcome.retryable(f.error, reason=Reason.reviewer_bug)
    if h is Happened.over_spend_cap:  # ours: a cap the operator set, never the document's
        return _release(f, f.error, Reason.spend_cap)
    if h is Happened.waited_too_long:  # ours: the fleet's limits or the provider's hold (I12)
        return _release(f, f"{WAITED}: {f.error}" if f.error else WAITED, Reason.rate_limited)
    if h is Happened.answered:
        raise ValueError("an answered review commits its report: decide() is for the other endings")
    return _llm_failure(f)


def _llm_failure(f: Facts) -> Outcome:
    """A provider failure or refusal, after the gate judged it (ARCHITECTURE.md, Whose fault it is).

    - This host's own check fails: the provider is down for everyone (nobody served since) or this
      host is cut off or misconfigured (others are served). Either way the document was never
      served: handed back, never counted nor charged (I9), and the host stops claiming, so it
      cannot hand the same task back again until its own check passes.
    - The check passes: the provider answers, so the failure is this document's or a passing one
      (the end of an outage looks the same). Handed back, counted, while under the bound; charged
      past it. A refusal while the check passes is the document's at once (a filtering 403).
    - Nobody asked (no gate): charged, as any failure without evidence against the document.
    """
    refused = f.happened is Happened.refused
    if f.host_ok is None:
        if refused:
            return Outcome.refused(f.error)
        return Outcome.retryable(f.error, f.retry_after, Reason.llm_unavailable)
    if f.host_ok is False:
        if refused:
            return _release(f, f"LLM configuration error: {f.error}", Reason.llm_configuration)
        if f.served_since:
            return _release(f, f"{HOST_CUT}: {f.error}", Reason.host_unreachable)
        return _release(f, f"the LLM provider is failing, handed back uncharged: {f.error}", Reason.llm_outage)
    if refused:
        return Outcome.refused(f.error)
    why = "the LLM breaker is open" if f.breaker_open else "the LLM failed this call but answers its check"
    return _bounded(f, Reason.llm_outage if f.breaker_open else Reason.provider_failed, why)


def _bounded(f: Facts, reason: Reason, why: str) -> Outcome:
    """A hand-back that counts (I12): charged once the task has had ``max_handbacks`` of them."""
    if f.handbacks >= f.max_handbacks:
        error = f"{why}; handed back {f.handbacks} times already, so charged: {f.error}"
        return Outcome.retryable(error, f.retry_after, Reason.llm_unavailable)
    return _release(
        f, f"{why}, handed back uncharged ({f.handbacks + 1}/{f.max_handbacks}): {f.error}", reason, counted=True
    )


def _release(f: Facts, error: str, reason: Reason, counted: bool = False) -> Outcome:
    return Outcome.release(error, reason, retry_after=f.retry_after, counted=counted)
