"""A product with one safety mechanism broken on purpose makes the harness report a violation
(``test_breaks_clean.py``: the same runs without the break are clean; two files, so that two test
processes share them)."""

from __future__ import annotations

import pytest

from sim.breaks import BREAKS
from sim.runner import Options, run_once

EXPECTED = {
    "unfenced-commit": {"I4"},
    "ack-any-token": {"I8", "I3", "I1"},
    "reaper-client-clock": {"I8", "I1"},
    "no-cancel": {"I11"},
    "no-clamp": {"I1", "I2"},
    "no-heartbeat": {"I8"},
    "no-step-report": {"I8"},
    "no-cancel-read": {"C1"},
    "no-rate-limit": {"RATE"},
    "no-hand-back": {"I9"},
    "no-handback-bound": {"I12", "I2"},
    "no-host-check": {"I9"},
    "waits-count": {"I12"},
    "believe-hints": {"RATE"},
    "no-presence": {"PRESENCE"},
    "dead-dispatcher": {"HEALTH"},
    "no-reservation": {"SPEND"},
    "unheld-batches": {"SPEND"},
    "landed-from-row": {"SPEND"},
}


@pytest.mark.long(200)
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_mechanism_is_caught(name):
    brk = BREAKS[name]
    for seed in range(30):
        result = run_once(brk.shows_in, "product", seed, Options(brk=name))
        found = {v.invariant for v in result.violations}
        if found:
            assert found & EXPECTED[name], (seed, found)
            return
        # the same seed without the break is clean: the break is what the harness caught
    pytest.fail(f"{name}: no violation in 30 seeds of {brk.shows_in}")


def test_the_cli_reports_the_break(capsys):
    from sim.crash_scenarios import main

    assert main(["--break", "reaper-client-clock", "--scenario", "skew", "--seeds", "3", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "product broken on purpose: reaper-client-clock" in out
    assert "--break reaper-client-clock" in out
