"""Issue 24's one benchmark command: docllm against the peers on the LLM-bound path, repeated
with the worker order rotated, each peer's throughput as a same-repeat ratio to docllm.

    python -m bench hotpath --c 256 1024 --latency 1 --processes 1 2 --repeats 3 --peers dramatiq dramatiq-durable
    python -m bench hotpath --quick      # C = 4, L = 0.2 s, one repeat: the smoke test

It reuses table 8's runners (``bench.llm``): the same mock LLM, the same tasks, the same window.
Per run: tasks/s and its share of C/L; CPU ms per task for the worker (its process tree) and for
each server (redis-server, mariadbd, the mock LLM; their CPU from enqueue to drain, so the
enqueue is included); peak RSS of the worker per 1,000 tasks in flight (min(C, N)).

Peers (``PEERS``): ``dramatiq`` (Redis only, one openai pool of C), ``dramatiq-durable`` (the
equal-durability fair peer: docllm's two fenced MariaDB writes per task, ``bench.peer_store``, and
its openai connections in pools of at most 32 as docllm's reviewer splits them), ``celery`` and
``arq``. Dramatiq runs at any ``--processes`` (Dramatiq's CLI, C threads a process, as docllm runs
each process at C); Celery and arq at one process only (other counts are listed as skipped).
Each repeat starts with the mock alone at each C (``load_check``: a plain asyncio client, N = 4C):
the ceiling a worker's "/ (C/L)" is read against.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import Any

from bench.common import Env, Table, cpu_seconds
from bench.llm import RUNNERS, docllm_run, dramatiq_run, dramatiq_stored_run
from bench.llm_mock_client import MockLLM, load_check
from bench.peers import installed

ROUNDS = 4  # N = ROUNDS x C unless --rounds says more (a steadier window, or one to profile)
QUICK = {"c": [4], "latency": [0.2], "processes": [1], "repeats": 1}
MOCK = "mock"  # the mock-alone rows' name
# peer -> (the package it needs, its runner(env, mock, c, n, cap, processes) or None: one process only)
PEERS: dict[str, tuple[str, Any]] = {
    "dramatiq": ("dramatiq", dramatiq_run),
    "dramatiq-durable": ("dramatiq", partial(dramatiq_stored_run, fair=True)),
    "celery": ("celery", None),
    "arq": ("arq", None),
}


def _servers(env: Env, mock: MockLLM) -> dict[str, int]:
    pids = {"redis-server": env.redis.pid, "mock LLM": mock.pid}
    if env.mariadb is not None:
        pids["mariadbd"] = env.mariadb.pid
    return pids


def one(
    env: Env, mock: MockLLM, name: str, c: int, processes: int, runner: Any = None, rounds: int = ROUNDS
) -> dict[str, Any]:
    """One run of ``name`` (or of ``runner(env, mock, c, n, cap)`` when given), N = ``rounds`` x C,
    with the servers' CPU."""
    n = rounds * c
    cap = 30 + 15 * n / c * mock.latency
    servers = _servers(env, mock)
    before = {k: cpu_seconds(p) or 0.0 for k, p in servers.items()}
    try:
        if runner is not None:
            r = runner(env, mock, c, n, cap)
        elif name == "docllm":
            r = docllm_run(env, mock, c, n, cap, processes)
        elif PEERS.get(name, (None, None))[1] is not None:
            r = PEERS[name][1](env, mock, c, n, cap, processes)
        else:
            r = dict((r[0].lower(), r[2]) for r in RUNNERS)[name](env, mock, c, n, cap)
    except Exception as exc:  # noqa: BLE001 - one broken worker must not hide the others
        r = {"name": name, "label": name, "concurrency": c, "n": n, "problems": [f"failed: {exc}".splitlines()[0]]}
    after = {k: cpu_seconds(p) or 0.0 for k, p in servers.items()}
    if runner is None:
        r["name"] = name  # the table's key (a runner names its log after itself)
    r["server_cpu_ms_per_task"] = {k: (after[k] - before[k]) * 1000 / n for k in servers}
    r["processes"] = processes
    return r


def mock_alone(mock: MockLLM, c: int) -> dict[str, Any]:
    """The mock's ceiling at C: a plain asyncio client, C connections, 4 requests each (N = 4C)."""
    check = load_check(mock, c, rounds=4)
    return {
        "name": MOCK,
        "label": "mock alone (plain asyncio client)",
        "concurrency": c,
        "n": check["requests"],
        "per_s": check["per_s"],
        "ratio": check["ratio"],
        "server_cpu_ms_per_task": {"mock LLM": check["mock_cpu_ms_per_request"]},
        "problems": [],
    }


def run(env: Env, results: dict) -> list[Table]:
    o = env.options
    q = env.quick
    cs = o.get("hp_c") or (QUICK["c"] if q else [64, 256, 1024])
    latencies = o.get("hp_latency") or (QUICK["latency"] if q else [1.0, 5.0])
    processes = o.get("hp_processes") or (QUICK["processes"] if q else [1, 2])
    repeats = o.get("hp_repeats") or (QUICK["repeats"] if q else 3)
    rounds = o.get("hp_rounds") or ROUNDS
    peers = [
        p
        for p in (o.get("hp_peers") or ["celery", "dramatiq", "dramatiq-durable", "arq"])
        if p not in ("docllm", "none")
    ]
    for p in peers:
        if not installed(PEERS[p][0]):
            env.skip(f"hotpath {p}: not installed")
        elif p == "dramatiq-durable" and env.mariadb is None:
            env.skip(f"hotpath {p}: MariaDB not installed")
    peers = [p for p in peers if installed(PEERS[p][0]) and (p != "dramatiq-durable" or env.mariadb is not None)]
    workers = ["docllm", *peers]
    runs: list[dict[str, Any]] = []
    for latency in latencies:
        with MockLLM(latency, env.dir / f"hotpath-mock-{latency:g}.log") as mock:
            for rep in range(repeats):
                for c in cs:
                    ceiling = mock_alone(mock, c)
                    ceiling.update(latency=latency, repeat=rep, processes=0)
                    runs.append(ceiling)
                    print(f"   L={latency:g} rep {rep} C={c} mock alone: {ceiling['ratio']:.3f} of C/L", flush=True)
                    for procs in processes:
                        order = workers[rep % len(workers) :] + workers[: rep % len(workers)]
                        for name in order:
                            if name != "docllm" and procs > 1 and PEERS[name][1] is None:
                                if rep == 0:
                                    env.skip(f"hotpath {name} --processes {procs}: not built")
                                continue
                            r = one(env, mock, name, c, procs, rounds=rounds)
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
            "/ mock alone same repeat",
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

    def same_repeat(rs: list[dict[str, Any]], base: dict[int, dict[str, Any]]) -> str | None:
        """Each run's tasks/s over the base's of its repeat, as median [min-max]."""
        return spread(
            [
                r["per_s"] / base[r["repeat"]]["per_s"]
                for r in rs
                if r.get("per_s") and base.get(r["repeat"], {}).get("per_s")
            ]
        )

    for latency in latencies:
        for c in cs:
            at = [r for r in runs if r["latency"] == latency and r["concurrency"] == c]
            ceiling = {r["repeat"]: r for r in at if r["name"] == MOCK}
            if ceiling:
                rs = list(ceiling.values())
                t.add(
                    latency,
                    c,
                    "-",
                    rs[0]["label"],
                    spread([r["per_s"] for r in rs]),
                    spread([r["ratio"] for r in rs]),
                    "-",
                    "1",
                    "-",
                    None,
                    None,
                    spread([r["server_cpu_ms_per_task"]["mock LLM"] for r in rs]),
                    "-",
                    "-",
                )
            for procs in processes:
                base = {r["repeat"]: r for r in at if r["processes"] == procs and r["name"] == "docllm"}
                for name in workers:
                    rs = [r for r in at if r["processes"] == procs and r["name"] == name]
                    if not rs:
                        continue
                    inflight = min(c, 4 * c) / 1000
                    t.add(
                        latency,
                        c,
                        procs,
                        rs[0].get("label", name),
                        spread([r.get("per_s") for r in rs]),
                        spread([r.get("ratio") for r in rs]),
                        same_repeat(rs, base) if name != "docllm" else "1",
                        same_repeat(rs, ceiling),
                        spread([r.get("cpu_ms_per_task") for r in rs]),
                        *(spread([r["server_cpu_ms_per_task"].get(s) for r in rs]) for s in servers),
                        spread([r["rss_peak_kib"] / 1024 / inflight for r in rs if r.get("rss_peak_kib")]),
                        "; ".join(p for r in rs for p in r["problems"]) or "-",
                    )
    t.note("Worker CPU: the worker's process tree over the window / N. Server CPU: from enqueue to drain / N.")
    t.note(
        "Mock alone: a plain asyncio client, C keep-alive connections, 4 requests each, taken at the start of "
        "each repeat (its mock CPU is per request); '/ mock alone' is a worker's tasks/s over it, same repeat."
    )
    return t
