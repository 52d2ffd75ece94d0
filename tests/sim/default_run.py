"""The default run of ``python -m sim.crash_scenarios`` (every scenario and seed the command runs
with no argument) in ``SHARES`` parts, one per test file (``test_default_run_<k>.py``): the suite
runs files in parallel test processes (pytest-xdist, ``--dist loadfile``), so they share it."""

from __future__ import annotations

import io
import time

from rich.console import Console

from sim import report
from sim.crash_scenarios import execute, parse_args, plan
from sim.runner import Options

SHARES = 8


def default_runs() -> list[tuple[str, str, int]]:
    return plan(parse_args([]))


def share(k: int) -> list[tuple[str, str, int]]:
    """Every SHARES-th run from the k-th: each share gets as many runs of each scenario."""
    return default_runs()[k::SHARES]


def check_share(k: int) -> str:
    """Run share ``k`` (2 processes); AssertionError with the violations and their replays."""
    started = time.perf_counter()
    results = execute(share(k), Options(), jobs=2)
    summary = (
        f"default run, share {k + 1}/{SHARES}: {len(results)} runs, {sum(r.tasks for r in results)} tasks "
        f"in {time.perf_counter() - started:.1f}s"
    )
    if any(r.violations for r in results):
        console = Console(file=io.StringIO(), width=160, highlight=False)
        report.print_violations(console, results)
        raise AssertionError(f"{summary}\n{console.file.getvalue()}")  # type: ignore[attr-defined]
    return summary
