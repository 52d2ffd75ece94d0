"""The ``money`` scenario (issue 43, I16): priced calls, a fleet's daily cap reached mid-run by the
realtime lane and the batch lane together, batches raced by two pollers and read twice, workers
killed mid-poll and after a create, Redis down and failing over; the operator raises the cap as the
faults stop. SPEND (sim/money.py) holds: the day's spend and holds never pass the cap by more than
answers beyond their estimates, and never more is counted than the rows' writes recorded. Each of
the ledger's mechanisms broken on purpose turns it red (``tests/sim/test_breaks.py``: breaks
``no-reservation``, ``unheld-batches``, ``landed-from-row``)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from sim.product import ProductSystem
from sim.runner import Options, RunResult, _run
from sim.scenarios import SCENARIOS, names, scenario_for
from tests.sim.fresh_process import in_fresh_process

SEEDS = range(2)


def money_run(seed: int) -> tuple[RunResult, dict[str, Any]]:
    """A clean run of the scenario and what its money observer saw (picklable: it runs in a new
    interpreter, tests/sim/fresh_process.py)."""
    scenario = scenario_for("money", seed)
    system = ProductSystem(scenario, seed, scenario.tasks, scenario.workers, Options())
    try:
        result = _run(system, "money", "product", seed, Options())
        money = system.money
        assert money is not None  # the money scenario watches spend
        seen: dict[str, Any] = {
            "refused": money.refused,
            "counted_total": money.counted_total,
            "races": money.sys.batch_watch.api.counts.races,
            "refused_batches": len([key for key in money.refused_keys if key.startswith("batch:")]),
        }
        return result, seen
    finally:
        system.world.close()


@functools.cache
def clean_run(seed: int) -> tuple[RunResult, dict[str, Any]]:
    return in_fresh_process(money_run, seed)


def test_the_scenario_is_named_but_not_in_the_default_run():
    assert "money" in SCENARIOS and "money" not in names()


@pytest.mark.parametrize("seed", SEEDS)
def test_the_cap_is_reached_and_spend_is_counted_once(seed):
    result, money = clean_run(seed)
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.double_commits == 0
    assert result.drain_ms is not None
    assert money["refused"] > 0, "the cap must be reached (reservations refused) for the run to mean anything"
    assert money["counted_total"] > 0


def test_racing_pollers_and_refused_batches_happen_over_the_seeds():
    races = refused_batches = 0
    for seed in SEEDS:
        result, money = clean_run(seed)
        races += money["races"]
        refused_batches += money["refused_batches"]
    assert races > 0 and refused_batches > 0
