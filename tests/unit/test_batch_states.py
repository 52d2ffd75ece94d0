"""The life of a batch as a pure function (domain/batches/model.py): its moves, and its terminal states."""

from __future__ import annotations

import itertools

import pytest

from docllm.domain.batches.model import BatchMember, BatchState, can_move, check_move, members_of

OPEN, UPLOADED, SUBMITTED, APPLIED, RETURNED = BatchState
FORWARD = {
    (OPEN, UPLOADED),
    (OPEN, SUBMITTED),  # adoption of a batch found by its metadata
    (OPEN, RETURNED),
    (UPLOADED, SUBMITTED),
    (UPLOADED, RETURNED),
    (SUBMITTED, APPLIED),
    (SUBMITTED, RETURNED),
}


def test_the_moves_are_the_life_of_a_batch_and_nothing_else():
    for frm, to in itertools.product(BatchState, repeat=2):
        allowed = (frm, to) in FORWARD or (frm == to and not frm.terminal)
        assert can_move(frm, to) is allowed, (frm, to)


def test_applied_and_returned_are_terminal_and_go_nowhere():
    assert {s for s in BatchState if s.terminal} == {APPLIED, RETURNED}
    for frm, to in itertools.product((APPLIED, RETURNED), BatchState):
        with pytest.raises(ValueError, match=f"from {frm.value} to {to.value}"):
            check_move(frm, to)


def test_members_are_sorted_and_each_task_is_in_once():
    assert members_of([(3, 1), BatchMember(1, 2)]) == (BatchMember(1, 2), BatchMember(3, 1))
    with pytest.raises(ValueError):
        members_of([(3, 1), (3, 2)])
