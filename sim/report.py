"""Turning runs into the table (rich), the JSON document, and the traces of violations.

One row per scenario and design. ``shortest`` picks, per scenario and design, the run whose first
violation came after the fewest trace lines: the shortest trace found, with its seed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from sim.ledger import Violation
from sim.runner import RunResult
from sim.scenarios import SCENARIOS

SHOWN_KINDS = ("fault", "crash", "life", "VIOLATION", "note")


@dataclass
class Row:
    scenario: str
    design: str
    runs: int = 0
    tasks: int = 0
    faults: int = 0
    stuck: int = 0
    lost: int = 0
    double_commits: int = 0
    max_attempts: int = 0
    max_processing_s: float = 0.0
    drain_s: float = 0.0
    not_drained: int = 0
    events: int = 0
    violations: dict[str, int] = field(default_factory=dict)
    failing_seeds: list[int] = field(default_factory=list)


def aggregate(results: list[RunResult]) -> list[Row]:
    rows: dict[tuple[str, str], Row] = {}
    for r in results:
        row = rows.setdefault((r.scenario, r.design), Row(r.scenario, r.design))
        row.runs += 1
        row.tasks += r.tasks
        row.faults += r.faults
        row.stuck += r.stuck
        row.lost += r.lost
        row.double_commits += r.double_commits
        row.max_attempts = max(row.max_attempts, r.max_attempts)
        row.max_processing_s = max(row.max_processing_s, r.max_processing_ms / 1000)
        row.events += r.events
        if r.drain_ms is None:
            row.not_drained += 1
        else:
            row.drain_s = max(row.drain_s, r.drain_ms / 1000)
        counts = Counter(v.invariant for v in r.violations)
        for name, n in counts.items():
            row.violations[name] = row.violations.get(name, 0) + n
        if r.violations:
            row.failing_seeds.append(r.seed)
    return list(rows.values())


COLUMNS = (
    "scenario",
    "design",
    "runs",
    "tasks",
    "faults",
    "stuck",
    "lost",
    "double commits",
    "max attempts",
    "max in processing",
    "time to drain",
    "violations",
)


def cells(row: Row) -> list[str]:
    drain = f"{row.drain_s:.0f}s" if not row.not_drained else f"never ({row.not_drained})"
    shown = " ".join(f"{k}x{v}" for k, v in sorted(row.violations.items())) or "0"
    return [
        row.scenario,
        row.design,
        str(row.runs),
        str(row.tasks),
        str(row.faults),
        str(row.stuck),
        str(row.lost),
        str(row.double_commits),
        str(row.max_attempts),
        f"{row.max_processing_s:.0f}s",
        drain,
        shown,
    ]


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def table(rows: list[Row], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for name, justify in (
        ("scenario", "left"),
        ("design", "left"),
        ("runs", "right"),
        ("tasks", "right"),
        ("faults", "right"),
        ("stuck", "right"),
        ("lost", "right"),
        ("double\ncommits", "right"),
        ("max\nattempts", "right"),
        ("max in\nprocessing", "right"),
        ("time to\ndrain", "right"),
        ("violations", "left"),
    ):
        t.add_column(name, justify=justify)
    for row in rows:
        style = "red" if row.violations and row.design == "product" else None
        t.add_row(*cells(row), style=style)
    return t


def headline(r: RunResult) -> Violation:
    """The violation a run is shown by: its first one; for the original design, its first one of
    the kind its scenario's defect is about, when it has one."""
    expected = SCENARIOS[r.scenario].expect_original if r.design == "original" and r.scenario in SCENARIOS else ()
    preferred = [v for v in r.violations if v.invariant in expected] or r.violations
    return min(preferred, key=lambda v: v.trace_len)


def shortest(results: list[RunResult]) -> dict[tuple[str, str], RunResult]:
    """Per scenario and design, the run whose headline violation came after the fewest trace lines
    (for the original design, runs that show the scenario's defect first)."""
    best: dict[tuple[str, str], tuple[tuple[int, int], RunResult]] = {}
    for r in results:
        if not r.violations:
            continue
        v = headline(r)
        expected = SCENARIOS[r.scenario].expect_original if r.scenario in SCENARIOS else ()
        rank = (0 if r.design != "original" or v.invariant in expected else 1, v.trace_len)
        key = (r.scenario, r.design)
        if key not in best or rank < best[key][0]:
            best[key] = (rank, r)
    return {key: r for key, (_, r) in best.items()}


def replay_command(r: RunResult, brk: str | None = None) -> str:
    extra = f" --break {brk}" if brk else ""
    return f"python -m sim.crash_scenarios --design {r.design} --scenario {r.scenario} --seed {r.seed}{extra} --trace"


def trace_excerpt(r: RunResult, limit: int = 45) -> list[str]:
    """The trace up to the headline violation: the faults, and every line of the task it is about.
    A line that repeats an earlier one of the same actor word for word (a reaper reading the same
    timestamp every cycle) is shown once."""
    v = headline(r)
    lines, seen, repeated = [], set(), 0
    for t, who, kind, task, text in r.trace[: v.trace_len + 1]:
        if not (task == v.task_id or (task is None and kind in SHOWN_KINDS) or v.task_id is None and kind != "call"):
            continue
        if kind == "call":
            key = (who, text)
            if key in seen:
                repeated += 1
                continue
            seen.add(key)
        lines.append(format_line(t, who, kind, task, text))
    if repeated:
        lines.insert(1, f"   ({repeated} repeated calls not shown)")
    if len(lines) > limit:
        lines = lines[:6] + [f"   ... {len(lines) - limit} lines left out ..."] + lines[-(limit - 6) :]
    return lines


def format_line(t: int, who: str, kind: str, task: int | None, text: str) -> str:
    shown_task = f"task {task}" if task is not None else ""
    return f"{t / 1000:9.3f}s {who:<13} {shown_task:<8} {text}"


def print_violations(console: Console, results: list[RunResult], brk: str | None = None) -> None:
    for (scenario, design), r in sorted(shortest(results).items()):
        first = headline(r)
        kinds = ", ".join(sorted({v.invariant for v in r.violations}))
        console.print(
            f"\n[bold]{design} / {scenario}[/bold]: violation of {first.invariant} "
            f"at {first.t / 1000:.1f}s (this run: {kinds}); seed {r.seed}"
        )
        console.print(f"  {first.message}", markup=False, highlight=False)
        console.print(f"  replay: {replay_command(r, brk)}", markup=False, highlight=False)
        for line in trace_excerpt(r):
            console.print("  " + line, markup=False, highlight=False)


def as_json(rows: list[Row], results: list[RunResult], brk: str | None = None) -> dict[str, Any]:
    best = shortest(results)
    return {
        "rows": [asdict(row) for row in rows],
        "violations": [
            {
                "scenario": r.scenario,
                "design": r.design,
                "seed": r.seed,
                "invariant": v.invariant,
                "task_id": v.task_id,
                "t_s": v.t / 1000,
                "message": v.message,
                "replay": replay_command(r, brk),
            }
            for r in results
            for v in r.violations
        ],
        "shortest_traces": [
            {"scenario": s, "design": d, "seed": r.seed, "replay": replay_command(r, brk), "trace": trace_excerpt(r)}
            for (s, d), r in sorted(best.items())
        ],
    }
