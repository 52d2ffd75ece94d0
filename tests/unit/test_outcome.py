"""The outcomes a runtime decides on its own carry their Reason, and the messages people read."""

from __future__ import annotations

from docllm.domain.errors import ConfigurationError
from docllm.domain.services.outcome import Outcome, OutcomeKind, Reason


def test_runtime_outcomes_carry_their_reason_and_message() -> None:
    cases = [
        (
            Outcome.timed_out(600),
            OutcomeKind.retryable,
            Reason.timeout,
            "attempt exceeded PROCESSING_TIMEOUT_SECONDS=600",
        ),
        (Outcome.shut_down(), OutcomeKind.release, Reason.shutdown, "worker shut down before the attempt finished"),
        (
            Outcome.misconfigured(ConfigurationError("401")),
            OutcomeKind.release,
            Reason.llm_configuration,
            "LLM configuration error: 401",
        ),
        (Outcome.crashed(RuntimeError("boom")), OutcomeKind.retryable, Reason.reviewer_bug, "RuntimeError: boom"),
    ]
    for outcome, kind, reason, error in cases:
        assert (outcome.kind, outcome.reason, outcome.error) == (kind, reason, error)


def test_reasons_are_label_values() -> None:
    assert all(r.value == r.name and r.value.isidentifier() and r.value.islower() for r in Reason)
    assert Outcome.success({}).reason is None
