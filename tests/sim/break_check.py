"""A product with one safety mechanism broken on purpose makes the harness report a violation, by
the invariant named, and the same run without the break is clean: the break is what the harness
caught, not the scenario. Shared by ``test_breaks.py`` and ``test_breaks_1.py`` (two files, so that
two test processes share the breaks)."""

from __future__ import annotations

import functools

import pytest

from sim.breaks import BREAKS
from sim.runner import Options, run_once
from tests.sim.default_run import default_runs as planned
from tests.sim.fresh_process import in_fresh_process

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
SEEDS = 30


def share(k: int, of: int = 2) -> list[str]:
    return sorted(BREAKS)[k::of]


@functools.cache
def default_runs() -> frozenset[tuple[str, str, int]]:
    """The default run's (scenario, design, seed): the suite runs them all (test_default_run_*)."""
    return frozenset(planned())


def check_break(name: str) -> None:
    brk = BREAKS[name]
    for seed in range(SEEDS):
        result = run_once(brk.shows_in, "product", seed, Options(brk=name))
        found = {v.invariant for v in result.violations}
        if not found:
            continue
        assert found & EXPECTED[name], (seed, found)
        if (brk.shows_in, "product", seed) not in default_runs():  # else the default run checks it clean
            clean = in_fresh_process(run_once, brk.shows_in, "product", seed)  # see fresh_process.py
            assert not clean.violations, (f"{brk.shows_in} seed {seed} without the break", clean.violations)
        return
    pytest.fail(f"{name}: no violation in {SEEDS} seeds of {brk.shows_in}")
