"""Issue 24's one benchmark command: docllm against the peers on the LLM-bound path, repeated
with the worker order rotated, each peer's throughput as a same-repeat ratio to docllm.

    python -m bench hotpath --c 256 1024 --latency 1 --processes 1 2 --repeats 2 --peers dramatiq
    python -m bench hotpath --quick      # C = 4, L = 0.2 s, one repeat: the smoke test

It reuses table 8's runners (``bench.llm``): the same mock LLM, the same tasks, the same window.
Per run: tasks/s and its share of C/L; CPU ms per task for the worker (its process tree) and for
each server (redis-server, mariadbd, the mock LLM; their CPU from enqueue to drain, so the
enqueue is included); peak RSS of the worker per 1,000 tasks in flight (min(C, N)).

Not built yet (issue 24 asks for them): the equal-durability peer (two MariaDB UPDATEs per task)
and the fair peer (openai pools of 32); peers at --processes 2 (a peer run at 2 processes is
listed as skipped, not run).
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import Env, Table, cpu_seconds
from bench.llm import RUNNERS, docllm_run
from bench.llm_mock_client import MockLLM
from bench.peers import installed

QUICK = {"c": [4], "latency": [0.2], "processes": [1], "repeats": 1}


def _servers(env: Env, mock: MockLLM) -> dict[str, int]:
    pids = {"redis-server": env.redis.pid, "mock LLM": mock.pid}
    if env.mariadb is not None:
        pids["mariadbd"] = env.mariadb.pid
    return pids


def one(env: Env, mock: MockLLM, name: str, c: int, processes: int, runner: Any = None) -> dict[str, Any]:
    """One run of ``name`` (or of ``runner(env, mock, c, n, cap)`` when given), with the servers' CPU."""
    n = 4 * c
    cap = 30 + 15 * n / c * mock.latency
    fn = runner or dict((r[0].lower(), r[2]) for r in RUNNERS)[name]
    servers = _servers(env, mock)
    before = {k: cpu_seconds(p) or 0.0 for k, p in servers.items()}
    try:
        if runner is None and name == "docllm":
            r = docllm_run(env, mock, c, n, cap, processes)
        else:
            r = fn(env, mock, c, n, cap)
    except Exception as exc:  # noqa: BLE001 - one broken worker must not hide the others
        r = {"name": name, "label": name, "concurrency": c, "n": n, "problems": [f"failed: {exc}".splitlines()[0]]}
    after = {k: cpu_seconds(p) or 0.0 for k, p in servers.items()}
    r["server_cpu_ms_per_task"] = {k: (after[k] - before[k]) * 1000 / n for k in servers}
    r["processes"] = processes
    return r


def run(env: Env, results: dict) -> list[Table]:
    o = env.options
    q = env.quick
    cs = o.get("hp_c") or (QUICK["c"] if q else [64, 256, 1024])
    latencies = o.get("hp_latency") or (QUICK["latency"] if q else [1.0, 5.0])
    processes = o.get("hp_processes") or (QUICK["processes"] if q else [1, 2])
    repeats = o.get("hp_repeats") or (QUICK["repeats"] if q else 3)
    peers = [p for p in (o.get("hp_peers") or ["celery", "dramatiq", "arq"]) if p != "docllm"]
    for p in peers:
        if not installed(p):
            env.skip(f"hotpath {p}: not installed")
    peers = [p for p in peers if installed(p)]
    workers = ["docllm", *peers]
    runs: list[dict[str, Any]] = []
    for latency in latencies:
        with MockLLM(latency, env.dir / f"hotpath-mock-{latency:g}.log") as mock:
            for rep in range(repeats):
                for c in cs:
                    for procs in processes:
                        order = workers[rep % len(workers) :] + workers[: rep % len(workers)]
                        for name in order:
                            if name != "docllm" and procs > 1:
                                env.skip(f"hotpath {name} --processes {procs}: not built")
                                continue
                            r = one(env, mock, name, c, procs)
                            r.update(latency=latency, repeat=rep)
                            runs.append(r)
                            print(
                                f"   L={latency:g} rep {rep} C={c} p={procs} {name}: "
                                + (
                                    f"{r['per_s']:.0f}/s = {r['ratio']:.3f} of C/L"
                                    if r.get("ratio")
                                    else "; ".join(r["problems"])
                                ),
                                flush=True,
                            )
    results["hotpath"] = {"runs": runs}
    return [table(runs, latencies, cs, processes, workers)]


def table(
    runs: list[dict[str, Any]], latencies: list[float], cs: list[int], processes: list[int], workers: list[str]
) -> Table:
    servers = ["redis-server", "mariadbd", "mock LLM"]
    t = Table(
        "hotpath",
        "Issue 24: docllm against the peers, one command (median [min-max] over repeats)",
        [
            "L s",
            "C",
            "processes",
            "worker",
            "tasks/s",
            "/ (C/L)",
            "/ docllm same repeat",
            "worker CPU ms/task",
            *(f"{s} CPU ms/task" for s in servers),
            "RSS MiB per 1,000 in flight",
            "problems",
        ],
    )

    def spread(values: list[float]) -> str | None:
        values = [v for v in values if v is not None]
        if not values:
            return None
        return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"

    for latency in latencies:
        for c in cs:
            for procs in processes:
                base = {
                    r["repeat"]: r
                    for r in runs
                    if r["latency"] == latency
                    and r["concurrency"] == c
                    and r["processes"] == procs
                    and r["name"] == "docllm"
                }
                for name in workers:
                    rs = [
                        r
                        for r in runs
                        if r["latency"] == latency
                        and r["concurrency"] == c
                        and r["processes"] == procs
                        and r["name"] == name
                    ]
                    if not rs:
                        continue
                    ratios = [
                        r["per_s"] / base[r["repeat"]]["per_s"]
                        for r in rs
                        if r.get("per_s") and base.get(r["repeat"], {}).get("per_s")
                    ]
                    inflight = min(c, 4 * c) / 1000
                    t.add(
                        latency,
                        c,
                        procs,
                        rs[0].get("label", name),
                        spread([r.get("per_s") for r in rs]),
                        spread([r.get("ratio") for r in rs]),
                        spread(ratios) if name != "docllm" else "1",
                        spread([r.get("cpu_ms_per_task") for r in rs]),
                        *(spread([r["server_cpu_ms_per_task"].get(s) for r in rs]) for s in servers),
                        spread([r["rss_peak_kib"] / 1024 / inflight for r in rs if r.get("rss_peak_kib")]),
                        "; ".join(p for r in rs for p in r["problems"]) or "-",
                    )
    t.note("Worker CPU: the worker's process tree over the window / N. Server CPU: from enqueue to drain / N.")
    return t
