"""``python -m bench.compare_src OTHER_SRC [--n N]``: the whole-worker measurement (table 3) with
docllm from two source trees, run after run, in one process: the ratio of a patch's effect.

    git archive HEAD src | tar -x -C /tmp/base          # the committed product
    # ... apply a patch in a copy at /tmp/patched/src ...
    python -m bench.compare_src /tmp/patched/src --base /tmp/base/src
    python -m bench.compare_src src --base src --other-env DOCLLM_TRACING=on   # a setting's cost

Each (database, concurrency) runs base, then other, then base and other again; the table shows
the median of each and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics

from bench import common, worker
from bench.common import Env, Table


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare_src")
    parser.add_argument("other", help="a src/ directory holding another docllm package")
    parser.add_argument("--base", help="the src/ directory to compare with (default: the installed docllm)")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--backends", nargs="+", choices=("sqlite", "mariadb"))
    parser.add_argument("--concurrency", nargs="+", type=int)
    parser.add_argument("--other-env", nargs="+", default=[], metavar="NAME=VALUE", help="settings for other only")
    args = parser.parse_args()
    original_spawn = worker.spawn
    other_env = dict(pair.split("=", 1) for pair in args.other_env)

    def spawn_with(src: str | None, settings: dict[str, str]):
        def spawn(argv, env, log):
            if src:
                env = dict(env, PYTHONPATH=os.pathsep.join([os.path.abspath(src), env.get("PYTHONPATH", "")]))
            return original_spawn(argv, {**env, **settings}, log)

        return spawn

    table = Table(
        "compare",
        f"Whole worker, base vs {args.other} (N={args.n}, median of {args.repeats})",
        [
            "database",
            "DOCLLM_CONCURRENCY",
            "base tasks/s",
            "other tasks/s",
            "other / base",
            "base worker CPU s/1000",
            "other worker CPU s/1000",
            "base DB statements/task",
            "other DB statements/task",
        ],
    )
    with Env(quick=False) as env:
        for backend in args.backends or worker.backends(env):
            for c in args.concurrency or worker.CONCURRENCIES:
                runs: dict[str, list] = {"base": [], "other": []}
                for _ in range(args.repeats):
                    for name, src in (("base", args.base), ("other", args.other)):
                        worker.spawn = spawn_with(src, other_env if name == "other" else {})
                        runs[name].append(worker.run_docllm(env, backend, c, args.n))
                med = {k: statistics.median(r["tasks_per_s"] for r in v) for k, v in runs.items()}
                cpu = {k: statistics.median(r["cpu_s_per_1000"]["worker"] for r in v) for k, v in runs.items()}
                stm = {k: v[-1]["per_task"].get("db_statements") for k, v in runs.items()}
                table.add(
                    backend,
                    c,
                    med["base"],
                    med["other"],
                    f"{med['other'] / med['base']:.2f} x",
                    cpu["base"],
                    cpu["other"],
                    stm["base"],
                    stm["other"],
                )
                print(table.text(), flush=True)
    worker.spawn = original_spawn
    print(f"machine: {common.machine()}")
    print(table.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
