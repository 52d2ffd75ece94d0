"""The product survives every scenario: the default run of the harness reports no violation (run by
tests/sim/test_default_run_<k>.py, a share each)."""

from __future__ import annotations

from sim.crash_scenarios import parse_args, plan
from sim.scenarios import names


def test_the_default_run_covers_the_issue_minimum():
    runs = plan(parse_args([]))
    assert {name for name, _, _ in runs} == set(names())
    assert sum(1 for name, _, _ in runs if name == "random") >= 200
    from sim.scenarios import default_tasks

    assert sum(default_tasks(name) for name, _, _ in runs) >= 1_000


def test_the_suite_runs_the_whole_default_run():
    """tests/sim/test_default_run_<k>.py run one share each: together, every run of the default run, once."""
    from pathlib import Path

    from tests.sim.default_run import SHARES, default_runs, share

    shares = [share(k) for k in range(SHARES)]
    assert sorted(run for part in shares for run in part) == sorted(default_runs())
    files = sorted(p.name for p in Path(__file__).parent.glob("test_default_run_*.py"))
    assert files == [f"test_default_run_{k}.py" for k in range(SHARES)]
    for k in range(SHARES):
        assert f"check_share({k})" in (Path(__file__).parent / files[k]).read_text("utf-8")


def test_a_backward_step_of_the_redis_clock_does_not_hold_the_fleets_rate_limit():
    """Random seed 189 with the fleet's limiter (DOCLLM_LLM_RPM=600): the Redis server's clock steps
    back 1 h three times. rate_limit.lua once kept the request bucket's TAT written on the old clock (up
    to HORIZON_MS ahead is believed), so every acquire waited about 3 h, every attempt was handed back
    after waiting PROCESSING_TIMEOUT_SECONDS (``rate_limited``), and the task never finished (I2); it
    now moves its stored times back by a step it sees (domain.llm.rate_limits.STEP_BACK_MS)."""
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
