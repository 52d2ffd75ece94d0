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


# The suite runs the first 3 seeds of each (``scripts/sim`` runs the default run's 2 to 6): this
# test took 256 s of a 14-minute suite beside the other test processes at 5.
SUITE_SEEDS = 3


@pytest.mark.timeout(900)  # about 20 s alone; beside the other test processes, several times that
@pytest.mark.long(160)
def test_the_default_run_has_no_violation(capsys):
    """Every named scenario of the default run but ``random`` (tests/sim/test_random_run.py runs
    that one: two files, so two test processes share the default run's time)."""
    scenarios = [name for name in names() if name != "random"]
    started = time.perf_counter()
    named = (arg for name in scenarios for arg in ("--scenario", name))
    status = main(["--jobs", "2", "--seeds", str(SUITE_SEEDS), *named])
    out = capsys.readouterr().out
    print(f"default run without random: {time.perf_counter() - started:.1f}s")
    assert status == 0, out
    assert "no violations" in out


def test_a_backward_step_of_the_redis_clock_does_not_hold_the_fleets_rate_limit():
    """Random seed 189 with the fleet's limiter (DOCLLM_LLM_RPM=600): the Redis server's clock steps
    back 1 h three times. rate_limit.lua once kept the request bucket's TAT written on the old clock (up
    to HORIZON_MS ahead is believed), so every acquire waited about 3 h, every attempt was handed back
    after waiting PROCESSING_TIMEOUT_SECONDS (``rate_limited``), and the task never finished (I2); it
    now moves its stored times back by a step it sees (domain.rate_limits.STEP_BACK_MS)."""
    from dataclasses import replace

    from sim.product import ProductSystem
    from sim.runner import Options, _run
    from sim.scenarios import scenario_for

    scenario = replace(scenario_for("random", 189), settings_changes={"llm_rpm": 600})
    system = ProductSystem(scenario, 189, scenario.tasks, scenario.workers, Options())
    try:
        result = _run(system, "random", "product", 189, Options())
    finally:
        system.world.close()
    assert not result.violations, [(v.invariant, v.message) for v in result.violations]


def test_a_hand_back_whose_check_ran_in_its_hosts_cut_is_not_a_served_hand_back():
    """Blame seed 19 at 16 tasks and 4 workers: an attempt's call failed on its own while the
    provider served its host, then its host was cut off before the gate's check, which failed:
    the product handed it back uncharged (``host_unreachable``). The checker took it for a 4th
    hand-back "while the provider served its host" (I12); the provider did not answer that
    host's check, so it is not one."""
    from sim.product import ProductSystem
    from sim.runner import Options, _run
    from sim.scenarios import scenario_for

    scenario = scenario_for("blame", 19)
    system = ProductSystem(scenario, 19, 16, 4, Options(tasks=16, workers=4))
    try:
        result = _run(system, "blame", "product", 19, Options(tasks=16, workers=4))
    finally:
        system.world.close()
    assert not result.violations, [(v.invariant, v.message) for v in result.violations]
    assert any("this host cannot reach the LLM" in e for _, _, _, _, e, _ in system.ledger.handed)
