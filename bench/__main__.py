"""``python -m bench``: every measurement in one run, one table each.

    python -m bench                      # everything
    python -m bench noop                 # the no-op tables 1-7 (under 10 minutes on 2 cores)
    python -m bench llm                  # 8: LLM-bound, mock LLM at 1.0 s, C = 16, 64, 256, 1024
    python -m bench idle-redis           # 9: idle Redis commands/s, and what one LPUSH wakes
    python -m bench lanes                # issue 26: lanes and tenants, B's wait, A/C shares, claim cost
    python -m bench store-load           # issue 31: MariaDB's Com_commit, Questions per task, connections
    python -m bench timeline             # issue 24: when each round of C requests goes (L = 5 s bursts)
    python -m bench capacity             # issue 29: 1 to 120 worker processes, costs per process and per task
    python -m bench --quick              # tiny N, no 100,000-lease reaper run, no 30 s lease, no peer recovery
    python -m bench --only floor queue_only
    python -m bench llm --llm-concurrency 16 64 --llm-latency 0.5
    python -m bench --markdown out.md --json out.json

Nothing is skipped silently: a missing server, peer or profiler is printed as SKIPPED with the
reason, and listed again at the end.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path

from bench import common
from docllm.entrypoints.processes import parse_processes  # light: the CLI imports it for --help

NOOP = ("floor", "queue_only", "worker", "profile", "peers", "reaper_cost", "recovery")
SECTIONS = NOOP + ("llm", "idle_redis", "lanes", "hotpath", "store_load", "timeline", "capacity")
GROUPS = {
    "noop": NOOP,
    "llm": ("llm",),
    "idle-redis": ("idle_redis",),
    "lanes": ("lanes",),
    "hotpath": ("hotpath",),
    "store-load": ("store_load",),
    "timeline": ("timeline",),
    "capacity": ("capacity",),
    "all": NOOP + ("llm", "idle_redis", "lanes"),
}


def docllm_source() -> str:
    import docllm

    path = Path(docllm.__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(common.ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(common.ROOT), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head, dirty = "?", ""
    in_checkout = str(path).startswith(str(common.ROOT / "src"))
    state = f"checkout at {head}" + (" with uncommitted changes under src/" if in_checkout and dirty else "")
    return f"{path} ({state if in_checkout else f'not the checkout; checkout HEAD is {head}'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "groups",
        nargs="*",
        choices=[*GROUPS, []],
        metavar="GROUP",
        help=f"what to run: {', '.join(GROUPS)} (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny N: for the smoke test")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these measurements")
    parser.add_argument(
        "--llm-concurrency",
        nargs="+",
        type=int,
        metavar="C",
        help="the LLM-bound table's concurrencies (default 16 64 256 1024; --quick: 4)",
    )
    parser.add_argument(
        "--llm-workers",
        nargs="+",
        choices=("docllm", "celery", "dramatiq", "arq"),
        metavar="NAME",
        help="the LLM-bound table's workers (default: docllm and every peer installed)",
    )
    parser.add_argument(
        "--llm-latency", type=float, metavar="SECONDS", help="the mock LLM's latency (default 1.0; --quick: 0.2)"
    )
    parser.add_argument("--c", nargs="+", type=int, help="hotpath, store-load: concurrencies (default 64 256 1024)")
    parser.add_argument("--latency", nargs="+", type=float, help="hotpath: mock latencies in s (default 1 5)")
    parser.add_argument("--processes", nargs="+", type=int, help="hotpath: worker processes (default 1 2)")
    parser.add_argument("--repeats", type=int, help="hotpath (default 3), store-load (default 1): repeats")
    parser.add_argument("--rounds", type=int, help="hotpath: N = rounds x C tasks a run (default 4)")
    parser.add_argument(
        "--processes-list",
        nargs="+",
        type=parse_processes,
        metavar="P",
        help="capacity: fleet sizes (default 1 25 50 100 120; --quick: 1 3)",
    )
    parser.add_argument(
        "--peers",
        nargs="+",
        choices=("celery", "dramatiq", "dramatiq-durable", "arq", "none"),
        help="hotpath: peers (dramatiq-durable: docllm's two MariaDB writes, openai pools of 32; none: docllm alone)",
    )
    parser.add_argument(
        "--before-src", type=Path, help="store-load: another docllm's src/ to run beside this one (before/after)"
    )
    parser.add_argument("--markdown", type=Path, help="write the tables as Markdown here")
    parser.add_argument("--json", type=Path, help="write every figure as JSON here")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    wanted = set(args.only or [s for g in (args.groups or ["all"]) for s in GROUPS[g]])

    command = "python -m bench " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    info = common.machine()
    started = time.time()
    header = [
        f"command: {command.strip()}",
        f"machine: nproc={info['nproc']}, memory {info['memory']}, {info['cpu']}, Linux {info['kernel']}, "
        f"Python {info['python']}",
        f"docllm: {docllm_source()}",
        f"redis: {common.REDIS_CONFIG}",
        f"mariadb: {common.MARIADB_CONFIG}",
    ]
    for line in header:
        print(line, flush=True)
    tables: list[common.Table] = []
    results: dict = {"machine": info, "command": command.strip()}
    failed: list[str] = []
    options = {
        "llm_concurrency": args.llm_concurrency,
        "llm_latency": args.llm_latency,
        "llm_workers": args.llm_workers,
        "hp_c": args.c,
        "hp_latency": args.latency,
        "hp_processes": args.processes,
        "hp_repeats": args.repeats,
        "hp_rounds": args.rounds,
        "hp_peers": args.peers,
        "before_src": args.before_src,
        "processes_list": args.processes_list,
    }
    with common.Env(quick=args.quick, workdir=args.workdir, options=options) as env:
        print(
            f"redis-server {env.redis.url} pid {env.redis.pid}; "
            f"mariadb {'pid ' + str(env.mariadb.pid) if env.mariadb else 'not installed'}; scratch {env.dir}",
            flush=True,
        )
        for name in SECTIONS:
            if name not in wanted:
                continue
            module = __import__(f"bench.{name}", fromlist=["run"])
            t = time.time()
            print(f"-- {name} ...", flush=True)
            try:
                new = module.run(env, results)
            except Exception:  # noqa: BLE001 - one broken measurement must not hide the others
                traceback.print_exc()
                failed.append(name)
                continue
            for table in new:
                print(table.text(), flush=True)
            tables += new
            print(f"-- {name}: {time.time() - t:.0f} s", flush=True)
        skipped = list(env.skipped)
    elapsed = time.time() - started
    footer = [f"total: {elapsed:.0f} s"] + [f"SKIPPED: {s}" for s in skipped] + [f"FAILED: {f}" for f in failed]
    for line in footer:
        print(line)
    results.update(skipped=skipped, failed=failed, elapsed_s=elapsed, tables=[t.as_dict() for t in tables])
    if args.markdown:
        body = ["```", *header, *footer, "```", ""] + [t.markdown() for t in tables]
        args.markdown.write_text("\n".join(body))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
