"""The other half of the breaks (tests/sim/break_check.py)."""

from __future__ import annotations

import pytest

from tests.sim.break_check import check_break, share


@pytest.mark.long(200)
@pytest.mark.parametrize("name", share(1))
def test_a_broken_mechanism_is_caught(name):
    check_break(name)
