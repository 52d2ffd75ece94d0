"""``python -m sim.crash_scenarios``: run the crash scenarios and check the invariants.

    python -m sim.crash_scenarios                         # every scenario, the product, default seeds
    python -m sim.crash_scenarios --design original       # the original note's design, same scenarios
    python -m sim.crash_scenarios --design both --json    # both, as JSON
    python -m sim.crash_scenarios --scenario d5 --seed 3 --trace     # replay one run, full trace
    python -m sim.crash_scenarios --scenario d10 --seed 0 --plot d10.png
    python -m sim.crash_scenarios --break unfenced-commit --scenario d5  # a broken product must fail

Exit status: 0 when no run broke an invariant, 1 otherwise (so ``--design original`` exits 1:
its violations are the point of the comparison), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable, Sequence

from rich.console import Console

from sim import report
from sim.breaks import BREAKS
from sim.runner import Options, RunResult, run_once
from sim.scenarios import all_names, default_seeds, names, scenario_for

DESIGNS = ("product", "original")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m sim.crash_scenarios",
        description="Deterministic crash simulation of docllm: every invariant of "
        "DESIGN section 7, checked after every event.",
    )
    p.add_argument(
        "--scenario",
        action="append",
        choices=all_names(),
        metavar="NAME",
        help=f"a scenario to run (repeatable; default: all of {', '.join(names())}; "
        f"only when named: {', '.join(n for n in all_names() if n not in names())})",
    )
    p.add_argument(
        "--seeds", type=int, metavar="N", help="seeds per scenario (default: 200 for random, 5 for the others)"
    )
    p.add_argument("--seed", type=int, action="append", metavar="N", help="run this seed only (repeatable): a replay")
    p.add_argument("--tasks", type=int, metavar="N", help="tasks per run (default: per scenario, 5 to 16)")
    p.add_argument("--workers", type=int, metavar="N", help="worker processes per run (default: per scenario)")
    p.add_argument(
        "--design",
        choices=DESIGNS + ("both",),
        default="product",
        help="the product (default), the original note's algorithm, or both",
    )
    p.add_argument(
        "--break",
        dest="brk",
        choices=sorted(BREAKS),
        metavar="NAME",
        help=f"break one safety mechanism of the product on purpose: {', '.join(sorted(BREAKS))}",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown (for docs/SIMULATION.md)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the per-task timeline of the first run (needs matplotlib)")
    p.add_argument("--trace", action="store_true", help="print the full trace of every run (use with --seed)")
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes running seeds in parallel (default: the number of CPUs)",
    )
    args = p.parse_args(argv)
    for name in ("seeds", "tasks", "workers", "jobs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name} must be at least 1")
    if args.seed and any(s < 0 for s in args.seed):
        p.error("--seed must not be negative")
    return args


def plan(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    designs = DESIGNS if args.design == "both" else (args.design,)
    runs = []
    for name in args.scenario or names():
        for design in designs:
            seeds = args.seed if args.seed else range(args.seeds or default_seeds(name))
            runs += [(name, design, seed) for seed in seeds]
    return runs


def _run(job: tuple[str, str, int, Options]) -> RunResult:
    name, design, seed, options = job
    return run_once(name, design, seed, options)


def execute(runs: list[tuple[str, str, int]], options: Options, jobs: int) -> list[RunResult]:
    work = [(name, design, seed, options) for name, design, seed in runs]
    if jobs <= 1 or len(work) < 4:
        return [_run(job) for job in work]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with context.Pool(jobs) as pool:
        return list(pool.imap(_run, work, chunksize=max(1, len(work) // (jobs * 8))))


def print_traces(console: Console, results: Iterable[RunResult]) -> None:
    for r in results:
        console.print(f"\n[bold]trace of {r.design} / {r.scenario} / seed {r.seed}[/bold]")
        for line in r.trace:
            console.print(report.format_line(*line), markup=False, highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.brk and args.design == "original":
        print("--break breaks the product; it cannot be combined with --design original", file=sys.stderr)
        return 2
    console = Console(highlight=False)
    if not console.is_terminal:  # a pipe or a file: wide enough that the table is not cut
        console = Console(highlight=False, width=160)
    options = Options(tasks=args.tasks, workers=args.workers, brk=args.brk, keep_trace=args.trace)
    runs = plan(args)
    started = time.perf_counter()
    results = execute(runs, options, args.jobs)
    elapsed = time.perf_counter() - started
    rows = report.aggregate(results)
    violated = any(r.violations for r in results)
    if args.json:
        doc = report.as_json(rows, results, args.brk)
        doc["seconds"] = round(elapsed, 2)
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    elif args.markdown:
        print(report.markdown(rows))
    else:
        if args.trace:
            print_traces(console, results)
        title = (
            f"{len(results)} runs, {sum(r.tasks for r in results)} tasks, "
            f"{sum(r.events for r in results)} events in {elapsed:.1f}s"
            + (f"; product broken on purpose: {args.brk}" if args.brk else "")
        )
        console.print(report.table(rows, title))
        if violated:
            report.print_violations(console, results, args.brk)
            console.print(
                f"\n[red]{sum(len(r.violations) for r in results)} violation(s) in "
                f"{sum(1 for r in results if r.violations)} run(s)[/red]"
            )
        else:
            console.print("\n[green]no violations[/green]")
    if args.plot:
        from sim.plot import draw

        name, design, seed = runs[0]
        run = run_once(
            name, design, seed, Options(tasks=args.tasks, workers=args.workers, brk=args.brk, keep_timeline=True)
        )
        draw(run, args.plot, scenario_for(name, seed).faults_s)
        if not args.json:
            console.print(f"timeline of {design} / {name} / seed {seed} written to {args.plot}")
    return 1 if violated else 0


if __name__ == "__main__":
    sys.exit(main())
