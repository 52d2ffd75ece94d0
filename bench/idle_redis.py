"""9. What an idle worker costs Redis, and what one new task wakes.

9a. Idle load: one ``docllm worker`` (the CLI, offline reviewer) on an empty queue at
``DOCLLM_CONCURRENCY`` = 1, 32 and 256; after it settles, the redis-server's
``total_commands_processed`` and ``INFO commandstats`` (which also counts commands run inside
scripts) are read twice, 10 s apart; nothing else talks to that server then. Celery (threads pool),
Dramatiq (threads) and arq at 256 beside it for reference. The worker's CPU over the same window.

9b. One LPUSH: three idle docllm worker processes at concurrency 8 share a queue; MONITOR records
every command; one task's payload is pushed to ready. Counted: the claim attempts (calls of a
script whose name has "claim", and blocking pops) and the worker processes that sent any command in
the 50 ms after the LPUSH, against what the idle rate would put in 50 ms. Connections are matched to
processes through /proc (each process's sockets and their local ports).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import PYTHON, Env, Table, child_env, cpu_seconds, local_ports, payload, spawn, stop, tail, wait_for
from bench.peers import celery_argv, installed

CONCURRENCIES = (1, 32, 256)
PEER_CONCURRENCY = 256
PREFIX = "benchidle"
WAKE_WORKERS, WAKE_CONCURRENCY, WAKE_WINDOW = 3, 8, 0.05
BLOCKING = {"BLMOVE", "BRPOPLPUSH", "BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX", "BLMPOP", "BZMPOP", "XREAD", "XREADGROUP"}


def docllm_argv() -> list[str]:
    return [PYTHON, "-m", "docllm.entrypoints.cli", "worker"]


def docllm_env(env: Env, url: str, c: int) -> dict[str, str]:
    from bench.worker import worker_env

    return worker_env(env, url, c, PREFIX)


def database(env: Env) -> str:
    url = env.new_database("mariadb" if env.mariadb is not None else "sqlite")
    from bench.worker import prepare_rows

    prepare_rows(url, 0)  # the schema, no rows
    return url


def commandstats(client) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in client.info("commandstats").items()}


def idle_load(
    env: Env, name: str, label: str, c: int, argv: list[str], run_env: dict[str, str], settle: float, seconds: float
) -> dict[str, Any]:
    env.flush()
    log = env.dir / f"idle-{name}-c{c}.log"
    proc = spawn(argv, run_env, log)
    client = env.client(0)
    try:
        time.sleep(settle)
        if proc.poll() is not None:
            raise RuntimeError(f"{label} exited with {proc.returncode}:\n{tail(log)}")
        stats0, cmds0, cpu0, t0 = commandstats(client), _total(client), cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        cmds1, cpu1, t1 = _total(client), cpu_seconds(proc.pid), time.monotonic()
        stats1 = commandstats(client)
        if proc.poll() is not None:
            raise RuntimeError(f"{label} exited with {proc.returncode}:\n{tail(log)}")
    finally:
        stop(proc, timeout=30)
        client.close()
    window = t1 - t0
    per_command = Counter({k: v - stats0.get(k, 0) for k, v in stats1.items()})
    for own in ("info",):  # the measurement's own calls
        per_command[own] -= 3
    top = ", ".join(f"{k} {v / window:.1f}" for k, v in per_command.most_common(4) if v > 0)
    return {
        "label": label,
        "concurrency": c,
        "window_s": window,
        "commands_per_s": (cmds1 - cmds0 - 1) / window,  # less the first INFO stats (a reply excludes itself)
        "cpu_share": None if None in (cpu0, cpu1) else (cpu1 - cpu0) / window,
        "top": top,
    }


def _total(client) -> int:
    return int(client.info("stats")["total_commands_processed"])


def idle_runs(
    env: Env, settle: float, seconds: float, concurrencies: tuple[int, ...], peers: bool
) -> list[dict[str, Any]]:
    runs = []
    for c in concurrencies:
        r = idle_load(
            env, "docllm", "docllm worker", c, docllm_argv(), docllm_env(env, database(env), c), settle, seconds
        )
        print(f"   idle docllm c={c}: {r['commands_per_s']:.1f} Redis commands/s", flush=True)
        runs.append(r)
    if not peers:
        return runs
    c = PEER_CONCURRENCY
    candidates = [
        ("celery", "Celery, threads pool", celery_argv("threads", c), {"BENCH_CELERY_URL": env.redis_url(0)}),
        (
            "dramatiq",
            "Dramatiq, C threads",
            [PYTHON, "-m", "bench.peer_dramatiq"],
            {"BENCH_DRAMATIQ_URL": env.redis_url(0), "BENCH_DRAMATIQ_THREADS": str(c)},
        ),
        (
            "arq",
            "arq, max_jobs C",
            [PYTHON, "-m", "bench.peer_arq"],
            {"BENCH_ARQ_URL": env.redis_url(0), "BENCH_ARQ_MAX_JOBS": str(c)},
        ),
    ]
    for module, label, argv, extra in candidates:
        if not installed(module):
            env.skip(f"idle Redis load of {label}: {module} is not installed")
            continue
        r = idle_load(
            env, module, label, c, argv, child_env(BENCH_LLM_URL="http://127.0.0.1:9/v1", **extra), settle, seconds
        )
        print(f"   idle {label} c={c}: {r['commands_per_s']:.1f} Redis commands/s", flush=True)
        runs.append(r)
    return runs


# -- 9b: one LPUSH --------------------------------------------------------------------------------


def script_names() -> dict[str, str]:
    """SHA1 -> script name for docllm's Lua files (alone, and after lib.lua as the queue loads them)."""
    import docllm.adapters.redis

    lua = Path(docllm.adapters.redis.__file__).parent / "lua"
    if not lua.is_dir():
        return {}
    lib = (lua / "lib.lua").read_text("utf-8") if (lua / "lib.lua").exists() else ""
    names = {}
    for path in lua.glob("*.lua"):
        text = path.read_text("utf-8")
        for body in (text, lib + "\n" + text):
            names[hashlib.sha1(body.encode()).hexdigest()] = path.stem
    return names


class Monitor:
    """MONITOR in a thread: every top-level command (not those run inside scripts) with its time."""

    def __init__(self, env: Env):
        self.env, self.entries, self._stop = env, [], threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.env.client(0) as client, client.monitor() as monitor:
            self._ready.set()
            for entry in monitor.listen():
                if self._stop.is_set():
                    return
                if entry.get("client_type") != "lua":
                    self.entries.append(entry)

    def __enter__(self) -> Monitor:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self.env.client(0) as client:
            client.echo("bench: monitor stop")  # wakes the listening thread
        self._thread.join(10)


def classify(entry: dict[str, Any], names: dict[str, str]) -> str:
    words = entry["command"].split()
    name = words[0].upper() if words else ""
    if name in ("EVALSHA", "EVALSHA_RO") and len(words) > 1:
        return "script " + names.get(words[1].lower(), words[1][:8])
    if name in ("EVAL", "FCALL"):
        return name + " (inline)"
    return name


def is_claim(kind: str) -> bool:
    return ("claim" in kind.lower() and kind.startswith("script")) or kind in BLOCKING


def wake_run(env: Env, workers: int, concurrency: int, baseline: float) -> dict[str, Any]:
    from bench.worker import prepare_rows, row_summary
    from docllm.adapters.redis.keys import RedisKeys

    env.flush()
    url = database(env)
    procs = [spawn(docllm_argv(), docllm_env(env, url, concurrency), env.dir / f"wake-{i}.log") for i in range(workers)]
    client = env.client(0)
    names = script_names()
    try:
        time.sleep(4.0)  # settled: schema checked, every slot idle
        for i, p in enumerate(procs):
            if p.poll() is not None:
                raise RuntimeError(f"worker {i} exited with {p.returncode}:\n{tail(env.dir / f'wake-{i}.log')}")
        (task_id,) = prepare_rows(url, 1, "# One task\n\nWoken by one LPUSH.\n")
        with Monitor(env) as monitor:
            time.sleep(baseline)
            client.lpush(RedisKeys(PREFIX).ready, payload(task_id, "wake"))
            wait_for(lambda: row_summary(url)["counts"].get("success") == 1, 30, 0.05, "the one task done")
            time.sleep(0.5)
        ports = {pid: local_ports(pid) for pid in (p.pid for p in procs)}
    finally:
        for p in procs:
            stop(p, timeout=30)
        client.close()
    entries = monitor.entries
    push = next(e for e in entries if e["command"].upper().startswith("LPUSH") and "wake" in e["command"])
    t0 = push["time"]
    owner = {port: pid for pid, held in ports.items() for port in held}
    before = [e for e in entries if t0 - baseline <= e["time"] < t0]
    after = [e for e in entries if t0 < e["time"] <= t0 + WAKE_WINDOW and e is not push]
    kinds_after = Counter(classify(e, names) for e in after)
    claims_after = [e for e in after if is_claim(classify(e, names))]
    claims_before = [e for e in before if is_claim(classify(e, names))]
    procs_after = {owner.get(int(e["client_port"]), "?") for e in after if e.get("client_port")}
    procs_claiming = {owner.get(int(e["client_port"]), "?") for e in claims_after if e.get("client_port")}
    return {
        "workers": workers,
        "concurrency": concurrency,
        "window_s": WAKE_WINDOW,
        "claims_after": len(claims_after),
        "claims_expected_idle": len(claims_before) * WAKE_WINDOW / baseline,
        "commands_after": len(after),
        "commands_expected_idle": len(before) * WAKE_WINDOW / baseline,
        "processes_after": len(procs_after - {"?"}),
        "processes_claiming": len(procs_claiming - {"?"}),
        "unmatched_connections": "?" in procs_after,
        "clients_claiming": len({e.get("client_port") for e in claims_after}),
        "kinds_after": ", ".join(f"{k} {v}" for k, v in kinds_after.most_common(6)),
    }


def run(env: Env, results: dict) -> list[Table]:
    quick = env.quick
    settle, seconds = (2.0, 2.0) if quick else (5.0, 10.0)
    runs = idle_runs(env, settle, seconds, (1, 4) if quick else CONCURRENCIES, peers=not quick)
    wake = wake_run(env, 2 if quick else WAKE_WORKERS, 2 if quick else WAKE_CONCURRENCY, 1.0 if quick else 2.0)
    print(
        f"   one LPUSH, {wake['workers']} workers x {wake['concurrency']}: {wake['claims_after']} claim attempts "
        f"from {wake['processes_claiming']} processes within {WAKE_WINDOW * 1000:.0f} ms",
        flush=True,
    )
    results["idle_redis"] = {"idle": runs, "wake": wake}
    idle = Table(
        "idle_redis",
        "9a. Idle Redis load: one worker process, empty queue",
        [
            "worker",
            "concurrency",
            "Redis commands/s",
            "worker CPU (% of a core)",
            "commandstats calls/s (inside scripts too)",
        ],
    )
    for r in runs:
        idle.add(
            r["label"],
            r["concurrency"],
            r["commands_per_s"],
            None if r["cpu_share"] is None else r["cpu_share"] * 100,
            r["top"] or "-",
        )
    idle.note(
        f"total_commands_processed over {seconds:g} s after {settle:g} s to settle (on redis 7 it counts "
        "the commands run inside scripts too); nothing else uses the server then. The peers run the "
        "LLM-bound jobs' modules with nothing queued."
    )
    w = Table(
        "wake",
        f"9b. One LPUSH: {wake['workers']} idle docllm worker processes x concurrency "
        f"{wake['concurrency']}, commands in the {WAKE_WINDOW * 1000:.0f} ms after it",
        ["figure", "after the LPUSH", "idle rate x the same window", "goal"],
    )
    w.add(
        "claim attempts (claim script calls and blocking pops)",
        wake["claims_after"],
        wake["claims_expected_idle"],
        f"<= 1 claimer woken: {'MET' if wake['processes_claiming'] <= 1 else 'NOT MET'}",
    )
    w.add("worker processes that attempted a claim", wake["processes_claiming"], None, "<= 1")
    w.add("connections that attempted a claim", wake["clients_claiming"], None, "-")
    w.add("all commands", wake["commands_after"], wake["commands_expected_idle"], "-")
    w.add("worker processes that sent any command", wake["processes_after"], None, "-")
    w.note(
        f"Commands after the LPUSH: {wake['kinds_after'] or 'none'} (MONITOR, top-level commands only; "
        "scripts named from docllm's lua/ files by SHA1)."
    )
    if wake["unmatched_connections"]:
        w.note("Some connections could not be matched to a worker process (closed before the end).")
    return [idle, w]
