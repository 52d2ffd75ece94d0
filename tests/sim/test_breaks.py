"""Half of the breaks (tests/sim/break_check.py), and the command's report of one."""

from __future__ import annotations

import pytest

from sim.breaks import BREAKS
from tests.sim.break_check import EXPECTED, check_break, share


def test_every_break_is_checked_once():
    assert sorted(share(0) + share(1)) == sorted(BREAKS) == sorted(EXPECTED)


@pytest.mark.long(200)
@pytest.mark.parametrize("name", share(0))
def test_a_broken_mechanism_is_caught(name):
    check_break(name)


def test_the_cli_reports_the_break(capsys):
    from sim.crash_scenarios import main

    assert main(["--break", "reaper-client-clock", "--scenario", "skew", "--seeds", "3", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert "product broken on purpose: reaper-client-clock" in out
    assert "--break reaper-client-clock" in out
