"""The ``lanes`` scenario (issue 26): tasks in three lanes from three tenants, one at a cap, with
crashes and Redis data loss; I1-I11 hold and no lane starves (I13, sim/lanes.py). The I13 check
itself can fail: with a bound of 0 every claim that passes a lane over is a violation."""

from __future__ import annotations

from collections import Counter

import pytest

from sim import lanes
from sim.runner import Options, run_once


def test_tasks_of_a_run_spread_over_every_lane_and_tenant():
    spread = Counter(lanes.lane_for(f"doc-{n}.md") for n in range(1, 16))  # the names of a run's 15 tasks
    assert {lane for lane, _ in spread} == {"interactive", "default", "bulk"}
    assert {tenant for _, tenant in spread} == set(lanes.TENANTS)


@pytest.mark.parametrize("seed", range(3))
def test_lanes_with_crashes_and_redis_data_loss_break_no_invariant(seed):
    result = run_once("lanes", "product", seed, Options())
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.double_commits == 0
    assert result.faults > 0


def test_the_starvation_check_can_fail(monkeypatch):
    monkeypatch.setattr(lanes.LaneWatch, "__init__", _zero_bound(lanes.LaneWatch.__init__))
    result = run_once("lanes", "product", 0, Options())
    assert {v.invariant for v in result.violations} == {"I13"}


def _zero_bound(init):
    def patched(self, system):
        init(self, system)
        self.bound = 0

    return patched
