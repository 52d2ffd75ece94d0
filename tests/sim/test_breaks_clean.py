"""The runs that show each break (``test_breaks.py``) are clean without it: the break is what the
harness caught, not the scenario."""

from __future__ import annotations

import pytest

from sim.breaks import BREAKS
from sim.runner import run_once


@pytest.mark.long(150)
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_without_the_break_the_same_runs_are_clean(name):
    brk = BREAKS[name]
    for seed in range(3):
        assert not run_once(brk.shows_in, "product", seed).violations
