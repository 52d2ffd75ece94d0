"""The product survives every scenario: the default run of the harness reports no violation."""

from __future__ import annotations

import time

import pytest

from sim.crash_scenarios import main, parse_args, plan
from sim.scenarios import names


def test_the_default_run_covers_the_issue_minimum():
    runs = plan(parse_args([]))
    assert {name for name, _, _ in runs} == set(names())
    assert sum(1 for name, _, _ in runs if name == "random") >= 200
    from sim.scenarios import default_tasks

    assert sum(default_tasks(name) for name, _, _ in runs) >= 1_000


@pytest.mark.timeout(900)  # about 30 s alone; beside the other test processes, several times that
def test_the_default_run_has_no_violation(capsys):
    started = time.perf_counter()
    status = main(["--jobs", "2"])
    out = capsys.readouterr().out
    print(f"default run: {time.perf_counter() - started:.1f}s")
    assert status == 0, out
    assert "no violations" in out
