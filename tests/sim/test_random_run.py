"""The default run's ``random`` scenario (here 100 of its 200 seeds of a random mix of every
fault: ``scripts/sim`` runs all 200), in a file of its own so that it runs in another test process
than the named scenarios (tests/sim/test_product_runs.py): the suite's slowest test, split in two."""

from __future__ import annotations

import time

import pytest

from sim.crash_scenarios import main


@pytest.mark.timeout(900)  # about 45 s alone on 2 cores; beside the other test processes, up to 5x that
@pytest.mark.long(60)
def test_the_random_scenario_has_no_violation(capsys):
    started = time.perf_counter()
    status = main(["--jobs", "2", "--scenario", "random", "--seeds", "100"])
    out = capsys.readouterr().out
    print(f"random, 100 seeds: {time.perf_counter() - started:.1f}s")
    assert status == 0, out
    assert "no violations" in out
    assert "100 runs," in out  # every seed ran
