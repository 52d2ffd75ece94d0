"""The batch lane's bound on hand-backs (issue 43, domain/batches/bound.py): when a task leaves
the lane for realtime, and what a batch's end does with a member at and past DOCLLM_MAX_HANDBACKS."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from docllm.domain.batches.bound import realtime_after, returned
from docllm.domain.tasks.outcome import OutcomeKind, Reason


def member(handbacks: int) -> object:
    return SimpleNamespace(task=SimpleNamespace(handbacks=handbacks))


@pytest.mark.parametrize(("bound", "after"), [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (10, 5)])
def test_a_task_leaves_the_lane_at_half_the_bound_rounded_up_and_at_least_one(bound, after):
    assert realtime_after(bound) == after


@pytest.mark.parametrize("bound", range(0, 6))
def test_a_batch_end_counts_each_return_and_fails_the_task_past_the_bound(bound):
    for n in range(bound + 3):
        outcome = returned(member(n), "batch r: the provider's batch b ended failed", bound)
        if n < bound:
            assert (outcome.kind, outcome.counted, outcome.reason) == (OutcomeKind.release, True, Reason.batch_returned)
            assert f"({n + 1}/{bound})" in (outcome.error or "")
        else:
            assert (outcome.kind, outcome.reason) == (OutcomeKind.permanent, Reason.handbacks_exhausted)
            assert f"handed back {n} times already (DOCLLM_MAX_HANDBACKS={bound})" in (outcome.error or "")
            assert "ended failed" in (outcome.error or "")  # the end that failed it, named
