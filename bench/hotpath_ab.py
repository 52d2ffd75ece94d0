"""``python -m bench.hotpath_ab OTHER_SRC [--base BASE_SRC]``: the LLM-bound worker (``bench hotpath``'s
docllm row) with docllm from two source trees, in turn, against one mock LLM: a patch's effect on
tasks/s and worker CPU per task, as a same-run ratio (this machine's speed moves single figures by
15 % over an evening).

    git archive HEAD src | tar -x -C /tmp/base        # the committed product
    python -m bench.hotpath_ab src --base /tmp/base/src --pairs 4

Each pair runs both trees, the order swapped every pair; the table shows each run and the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from bench.common import Env
from bench.hotpath import one
from bench.llm import docllm_run
from bench.llm_mock_client import MockLLM


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath_ab")
    parser.add_argument("other", help="a src/ directory holding another docllm package")
    parser.add_argument("--base", default="src", help="the src/ directory to compare with (default: src)")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--c", type=int, default=1024)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=8, help="N = rounds x C tasks a run")
    args = parser.parse_args(argv)
    trees = {"base": os.path.abspath(args.base), "other": os.path.abspath(args.other)}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}

    def runner(src: str):
        return lambda env, mock, c, n, cap: docllm_run(env, mock, c, n, cap, 1, PYTHONPATH=src)

    with Env(quick=False) as env, MockLLM(args.latency, env.dir / "mock.log") as mock:
        for pair in range(args.pairs):
            for name in list(trees) if pair % 2 == 0 else list(trees)[::-1]:
                r = one(env, mock, name, args.c, 1, runner=runner(trees[name]), rounds=args.rounds)
                if r.get("problems"):
                    print(f"{name} pair {pair}: {'; '.join(r['problems'])}", flush=True)
                    return 1
                runs[name].append(r)
                print(
                    f"{name} pair {pair}: {r['per_s']:.0f} tasks/s, {r['cpu_ms_per_task']:.3f} ms CPU a task",
                    flush=True,
                )
    print(f"\nC = {args.c}, L = {args.latency:g} s, N = {args.rounds}C, {args.pairs} pairs")
    print("| tree | src | tasks/s (runs) | worker CPU ms/task (runs) | median tasks/s | median CPU ms/task |")
    print("|---|---|---|---|---|---|")
    medians = {}
    for name, rs in runs.items():
        rates, cpus = [r["per_s"] for r in rs], [r["cpu_ms_per_task"] for r in rs]
        medians[name] = (statistics.median(rates), statistics.median(cpus))
        print(
            f"| {name} | {trees[name]} | {' / '.join(f'{x:.0f}' for x in rates)} | "
            f"{' / '.join(f'{x:.3f}' for x in cpus)} | {medians[name][0]:.0f} | {medians[name][1]:.3f} |"
        )
    print(
        f"\nother / base: tasks/s {medians['other'][0] / medians['base'][0]:.3f}, "
        f"CPU per task {medians['other'][1] / medians['base'][1]:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
