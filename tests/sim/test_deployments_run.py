"""The ``deployments`` scenario (issue 27): two LLM deployments down at times of their own, the
workers' shipped RoutedReviewer falling back between them, with crashes, a Redis outage and skewed
clocks. I1-I12 hold, I9 per deployment, and FALLBACK (sim/deployments.py): commits go on while one
deployment serves, and resume after both were down. A router that never falls back is caught."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from docllm.adapters.llm import routed_reviewer
from sim.deployments import DeploymentWatch
from sim.product import ProductSystem
from sim.runner import Options, RunResult, _run
from sim.scenarios import SCENARIOS, names, scenario_for

SEEDS = range(3)


def run(seed: int) -> tuple[RunResult, Any]:
    scenario = scenario_for("deployments", seed)
    system = ProductSystem(scenario, seed, scenario.tasks, scenario.workers, Options())
    try:
        return _run(system, "deployments", "product", seed, Options()), system.deploy
    finally:
        system.world.close()


def test_the_scenario_is_named_but_not_in_the_default_run():
    assert "deployments" in SCENARIOS and "deployments" not in names()


@pytest.mark.parametrize("seed", SEEDS)
def test_two_deployments_with_independent_outages_break_no_invariant(seed):
    result, deploy = run(seed)
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.double_commits == 0
    assert result.drain_ms is not None
    assert deploy.max_owed_ms <= deploy.bound_ms
    assert all(llm.calls > 0 for llm in deploy.llms.values())  # both served chunks
    one_down, all_down = deploy.periods()
    assert one_down > deploy.bound_ms and all_down > 0  # each seed has both kinds of outage
    assert result.fault_kinds.get("crash", 0) > 0


def test_a_router_that_never_falls_back_is_caught(monkeypatch):
    """Every chunk to the first deployment, none to the other when it fails (the fleet served as
    if it had one provider): attempts are charged for the first one's outage while the other
    serves (I9, per deployment), and nothing is committed during its outage (FALLBACK)."""
    monkeypatch.setattr(routed_reviewer, "route", _first_only)
    result, _ = run(0)
    found = {v.invariant for v in result.violations}
    assert {"I9", "FALLBACK"} <= found, found
    assert any("because deployment a was down" in v.message for v in result.violations if v.invariant == "I9")


def test_a_chunk_at_two_deployments_at_once_is_caught():
    """ROUTE, on the watch itself: the routed reviewer never does it, so no run can show it."""
    seen: list[tuple[Any, ...]] = []
    watch = object.__new__(DeploymentWatch)
    watch.sys, watch.in_flight = SimpleNamespace(ledger=SimpleNamespace(violate=lambda *a, **k: seen.append(a))), {}

    async def chunk() -> None:
        first = watch.sending("a")
        watch.sending("a")  # the same deployment again (a retry of its own): not two at once
        assert seen == []
        watch.sending("b")
        watch.sent(first, "b")
        watch.sending("a")  # after b answered: a fallback back to a is fine

    asyncio.run(chunk())
    assert [a[0] for a in seen] == ["ROUTE"]


def _first_only(deployments: Any, states: Any, tried: Any, draw: float) -> Any:
    return None if tried else deployments[0]
