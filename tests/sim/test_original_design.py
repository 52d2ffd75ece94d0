"""``--design original`` reproduces the defects D1 to D7 of the note's algorithm, each with a
trace that leads to the violation and the seed to replay it."""

from __future__ import annotations

import pytest

from sim import report
from sim.runner import run_once
from sim.scenarios import SCENARIOS
from tests.sim.default_run import default_runs

SEEDS = range(5)
DEFECTS = ["d1", "d2", "d3", "d4", "d5", "d6", "d7"]


@pytest.mark.parametrize("name", DEFECTS)
def test_the_original_design_breaks_what_the_defect_says(name):
    expected = set(SCENARIOS[name].expect_original)
    results = [run_once(name, "original", seed) for seed in SEEDS]
    found = {v.invariant for r in results for v in r.violations}
    assert found & expected, f"{name}: expected one of {expected}, found {found or 'nothing'}"
    best = report.shortest(results)[(name, "original")]
    excerpt = report.trace_excerpt(best)
    shown = report.headline(best)
    assert shown.invariant in expected
    assert f"{shown.invariant}: " in excerpt[-1]  # the excerpt ends at the violation
    assert len(excerpt) > 3
    assert f"--seed {best.seed}" in report.replay_command(best)


def test_the_product_passes_the_same_seeds():
    """The product's runs of the same seeds are the default run's (test_default_run_*: no violation)."""
    runs = set(default_runs())
    assert all((name, "product", seed) in runs for name in DEFECTS for seed in SEEDS)


def test_the_cli_prints_a_trace_and_a_replay_command_and_exits_1(capsys):
    from sim.crash_scenarios import main

    assert main(["--design", "original", "--scenario", "d1", "--seeds", "2", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "original / d1: violation of" in out
    assert "replay: python -m sim.crash_scenarios --design original --scenario d1 --seed" in out
    assert "CRASH" in out
