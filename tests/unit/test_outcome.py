"""Whose fault it is (domain.tasks.verdict, ARCHITECTURE.md, Whose fault it is): every ending of an attempt as a table,
and the bound on uncharged hand-backs (I12) as a property over any sequence of failures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docllm.domain.errors import (
    ConfigurationError,
    OverCostCap,
    PermanentError,
    ProviderUnavailable,
    SpendCapReached,
    TransientError,
    Unavailable,
)
from docllm.domain.tasks.outcome import Outcome, OutcomeKind, Reason
from docllm.domain.tasks.verdict import JUDGED, Facts, Happened, decide, facts_of

H = Happened
CHARGE, BACK, FAIL, CANCEL = OutcomeKind.retryable, OutcomeKind.release, OutcomeKind.permanent, OutcomeKind.cancelled

# happened, breaker open, served since, host's check, hand-backs so far (of 3) -> verdict, reason, counted
TABLE = [
    (H.cancelled, False, False, None, 0, CANCEL, Reason.cancelled, False),
    (H.permanent, False, False, None, 0, FAIL, Reason.permanent_error, False),
    (H.invalid_document, False, False, None, 0, FAIL, Reason.invalid_document, False),
    (H.shutdown, False, False, None, 9, BACK, Reason.shutdown, False),
    (H.lease_lost, False, False, None, 9, BACK, Reason.lease_lost, False),
    (H.store_down, False, False, None, 9, BACK, Reason.unavailable, False),
    (H.timed_out, False, False, None, 0, CHARGE, Reason.timeout, False),
    (H.invalid_answer, False, False, None, 0, CHARGE, Reason.transient_error, False),
    (H.reviewer_bug, False, False, None, 0, CHARGE, Reason.reviewer_bug, False),
    (H.waited_too_long, False, False, None, 0, BACK, Reason.rate_limited, False),
    (H.waited_too_long, False, False, None, 9, BACK, Reason.rate_limited, False),
    # a daily spend cap refused the reservation (I16): the operator's, never counted, never charged
    (H.over_spend_cap, False, False, None, 0, BACK, Reason.spend_cap, False),
    (H.over_spend_cap, False, False, None, 99, BACK, Reason.spend_cap, False),
    # a provider failure nobody judged (no gate): no evidence against the document's fault
    (H.provider_failed, False, False, None, 0, CHARGE, Reason.llm_unavailable, False),
    (H.refused, False, False, None, 0, CHARGE, Reason.refused_document, False),
    # an outage: this host's check fails and nobody is served; never counted, never charged
    (H.provider_failed, True, False, False, 0, BACK, Reason.llm_outage, False),
    (H.provider_failed, False, False, False, 99, BACK, Reason.llm_outage, False),
    (H.refused, True, False, False, 99, BACK, Reason.llm_configuration, False),
    # this host is cut off (or its key is bad) while others are served: the host's, never charged
    (H.provider_failed, False, True, False, 0, BACK, Reason.host_unreachable, False),
    (H.provider_failed, False, True, False, 99, BACK, Reason.host_unreachable, False),
    (H.refused, False, True, False, 99, BACK, Reason.llm_configuration, False),
    # the provider answers this host's check: a poison batch that opened the breaker, or one failed call
    (H.provider_failed, True, False, True, 0, BACK, Reason.llm_outage, True),
    (H.provider_failed, True, False, True, 2, BACK, Reason.llm_outage, True),
    (H.provider_failed, True, False, True, 3, CHARGE, Reason.llm_unavailable, False),
    (H.provider_failed, False, True, True, 0, BACK, Reason.provider_failed, True),
    (H.provider_failed, False, False, True, 3, CHARGE, Reason.llm_unavailable, False),
    (H.refused, False, True, True, 0, CHARGE, Reason.refused_document, False),
]


@pytest.mark.parametrize(("happened", "open_", "served", "host_ok", "handbacks", "kind", "reason", "counted"), TABLE)
def test_every_ending_has_one_verdict_and_reason(happened, open_, served, host_ok, handbacks, kind, reason, counted):
    facts = Facts(happened, error="boom", handbacks=handbacks, max_handbacks=3)
    outcome = decide(facts.judged(breaker_open=open_, served_since=served, host_ok=host_ok))
    assert (outcome.kind, outcome.reason, outcome.counted) == (kind, reason, counted)
    assert outcome.error


def test_the_table_covers_every_kind_of_ending():
    assert {row[0] for row in TABLE} == set(Happened) - {Happened.answered}


def test_messages_people_read():
    timed_out = decide(Facts(H.timed_out, limit_seconds=600))
    assert timed_out.error == "attempt exceeded PROCESSING_TIMEOUT_SECONDS=600"
    assert decide(Facts(H.shutdown)).error == "worker shut down before the attempt finished"
    charged = decide(Facts(H.provider_failed, "LLM 500", handbacks=3).judged(True, False, True))
    assert "handed back 3 times already, so charged: LLM 500" in (charged.error or "")
    back = decide(Facts(H.provider_failed, "LLM 500", handbacks=1).judged(False, True, True))
    assert "handed back uncharged (2/3): LLM 500" in (back.error or "")
    assert Outcome.crashed(RuntimeError("boom")).error == "RuntimeError: boom"


def test_a_hand_back_keeps_the_providers_retry_after():
    outcome = decide(Facts(H.provider_failed, retry_after=7.0).judged(False, True, True))
    assert outcome.kind is BACK and outcome.retry_after == 7.0


def test_errors_map_to_what_happened():
    cases = {
        ConfigurationError("401"): H.refused,
        Unavailable("redis"): H.store_down,
        ProviderUnavailable("500", retry_after=3): H.provider_failed,
        TransientError("not JSON"): H.invalid_answer,
        PermanentError("unreviewable"): H.permanent,
        KeyError("x"): H.reviewer_bug,
        SpendCapReached("the fleet's cap", 60.0): H.over_spend_cap,
        OverCostCap("over the per-task cap"): H.invalid_document,
    }
    for exc, happened in cases.items():
        assert facts_of(exc).happened is happened
    assert facts_of(ProviderUnavailable("429", retry_after=3)).retry_after == 3
    assert facts_of(SpendCapReached("cap", 60.0)).retry_after == 60.0  # the hand-back waits
    assert facts_of(PermanentError("unreviewable")).error == "unreviewable"


def test_reasons_are_label_values():
    assert all(r.value == r.name and r.value.isidentifier() and r.value.islower() for r in Reason)
    assert Outcome.success({}).reason is None


def test_an_answered_review_is_not_decided():
    with pytest.raises(ValueError):
        decide(Facts(H.answered))


# -- I12: no sequence of failures hands a task back without bound while the provider serves ------

FAILURE = st.tuples(
    st.sampled_from(sorted(JUDGED, key=lambda h: h.value)),
    st.booleans(),  # breaker open
    st.booleans(),  # served since
    st.sampled_from([True, False, None]),  # this host's check
)


@given(st.lists(FAILURE, max_size=40), st.integers(min_value=0, max_value=5))
def test_hand_backs_while_the_provider_serves_are_bounded(failures, max_handbacks):
    """Replays what ``TaskProcessor`` does with each verdict (a counted hand-back adds one to the
    row) and counts the hand-backs that happened while the provider served this host (its own
    check passed): never more than ``max_handbacks`` without a charge in between. A host whose
    own check fails is never charged (I9): the host stops claiming instead."""
    handbacks = serving_run = 0
    for happened, open_, served, host_ok in failures:
        outcome = decide(
            Facts(happened, "x", handbacks=handbacks, max_handbacks=max_handbacks).judged(open_, served, host_ok)
        )
        serving = host_ok is True
        if host_ok is False:
            assert outcome.kind is BACK and not outcome.counted  # the host's or the provider's
        if outcome.kind is BACK:
            handbacks += outcome.counted
            serving_run += serving
            assert serving_run <= max_handbacks, (failures, max_handbacks)
            if serving:
                assert outcome.counted  # every hand-back while the provider serves counts
        else:
            assert outcome.kind is CHARGE
            serving_run = 0


@given(st.lists(st.tuples(st.booleans(), st.sampled_from([False, None])), max_size=40))
def test_an_outage_never_charges(failures):
    """I9: while nobody is served and this host's check fails, no verdict charges the document,
    whatever its hand-backs so far."""
    for handbacks, (open_, host_ok) in enumerate(failures):
        if host_ok is None:
            continue  # no gate asked: not an outage the runtime knows of
        outcome = decide(Facts(H.provider_failed, "x", handbacks=handbacks).judged(open_, False, host_ok))
        assert outcome.kind is BACK and not outcome.counted
