"""8. LLM-bound: every task is one chat completion against a mock LLM with a fixed latency L, so
the ideal throughput of C attempts in flight is C / L and a worker's figure is its share of it.

First the mock (``bench.llm_mock``, its own process) is checked not to be the bottleneck: a plain
asyncio client with C keep-alive connections at the largest C, 4 requests each, must get >= 0.98
of C / L. Then, for each C (one worker process each, N = 4C tasks, all in one run):

- docllm: ``docllm worker`` (the CLI) with ``DOCLLM_CONCURRENCY=C``, ``DOCLLM_LLM_PROVIDER=openai``
  and ``DOCLLM_LLM_BASE_URL`` the mock, on this run's redis-server and MariaDB (SQLite when MariaDB
  is not installed); N rows inserted and their payloads pushed to ready before it starts;
- Celery (threads pool, ``-c C``, acks_late), Dramatiq (one process, C threads, default prefetch)
  and arq (``max_jobs`` C), each job making the same call (``bench.llm_task``: the openai client,
  AsyncOpenAI for arq), N jobs queued before the worker starts.

Window: from the mock's first chat request to the moment a 20 ms poll sees every task acked
(docllm: ready, leases and delayed empty; the peers as in table 4; arq: its queue empty). CPU of
the worker process over the window / N; peak RSS and threads from 50 ms samples. A run that has
not drained within its cap is stopped and reported with how many answers it got.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import PYTHON, Env, Sampler, Table, child_env, payload, spawn, stop, tail, tree_cpu_seconds, wait_for
from bench.llm_mock_client import MockLLM, load_check
from bench.llm_task import DOCUMENT, MODEL
from bench.peers import DB, celery_argv, celery_drained, dramatiq_drained, installed, set_urls

CONCURRENCIES = (16, 64, 256, 1024)
QUICK_CONCURRENCIES = (4,)
LATENCY = 1.0
QUICK_LATENCY = 0.2
ARQ_DB = 4
PREFIX = "benchllm"


def docllm_run(
    env: Env, mock: MockLLM, c: int, n: int, cap: float, processes: int = 1, **extra_env: str
) -> dict[str, Any]:
    """``extra_env``: more worker settings, or ``PYTHONPATH`` to run another docllm's ``src``."""
    from bench.worker import prepare_rows, row_summary, worker_env
    from docllm.adapters.redis.keys import RedisKeys

    backend = "mariadb" if env.mariadb is not None else "sqlite"
    url = env.new_database(backend)
    ids = prepare_rows(url, n, DOCUMENT)
    keys = RedisKeys(PREFIX)

    def enqueue() -> None:
        with env.client(0) as client:
            for start in range(0, n, 1000):
                client.lpush(keys.ready, *(payload(i) for i in ids[start : start + 1000]))

    left: dict[str, int] = {}

    def drained(client) -> bool:
        pipe = client.pipeline(transaction=False)
        pipe.llen(keys.ready).zcard(keys.lease_index).zcard(keys.delayed)
        left.update(zip(("ready", "leases", "delayed"), pipe.execute(), strict=True))
        return not any(left.values())

    argv = [PYTHON, "-m", "docllm.entrypoints.cli", "worker"]
    if processes > 1:
        argv += ["--processes", str(processes)]
    run_env = worker_env(
        env,
        url,
        c,
        PREFIX,
        DOCLLM_LLM_PROVIDER="openai",
        DOCLLM_LLM_BASE_URL=mock.base_url,
        DOCLLM_LLM_API_KEY="bench",
        DOCLLM_LLM_MODEL=MODEL,
        **extra_env,
    )
    r = measure(env, mock, "docllm", c, n, 0, enqueue, argv, run_env, drained, cap)
    rows = row_summary(url)
    r["rows"] = rows
    r["label"] = f"docllm worker ({backend})"
    if r["problems"]:
        r["problems"].append("left at the cap: " + ", ".join(f"{k} {v}" for k, v in left.items()))
    if rows["counts"].get("success") != n or rows["max_attempt"] != 1:
        r["problems"].append(f"rows after the stop: {rows['counts']}, max attempt {rows['max_attempt']}")
    elif r["problems"]:
        r["problems"].append(f"rows after the stop: all {n} success at attempt 1")
    return r


def celery_run(env: Env, mock: MockLLM, c: int, n: int, cap: float) -> dict[str, Any]:
    set_urls(env)
    from bench import peer_celery

    def enqueue() -> None:
        for i in range(n):
            peer_celery.llm.apply_async((i,))

    r = measure(
        env,
        mock,
        "celery",
        c,
        n,
        DB["celery"],
        enqueue,
        celery_argv("threads", c),
        _peer_env(env, mock, c, BENCH_CELERY_URL=env.redis_url(DB["celery"])),
        celery_drained,
        cap,
    )
    r["label"] = "Celery, threads pool, acks_late"
    return r


def dramatiq_run(env: Env, mock: MockLLM, c: int, n: int, cap: float, processes: int = 1) -> dict[str, Any]:
    set_urls(env)
    from bench import peer_dramatiq

    def enqueue() -> None:
        for i in range(n):
            peer_dramatiq.llm.send(i)

    r = measure(
        env,
        mock,
        "dramatiq",
        c,
        n,
        DB["dramatiq"],
        enqueue,
        _dramatiq_argv(c, processes),
        _peer_env(env, mock, c, BENCH_DRAMATIQ_URL=env.redis_url(DB["dramatiq"]), BENCH_DRAMATIQ_THREADS=str(c)),
        dramatiq_drained,
        cap,
    )
    r["label"] = "Dramatiq, " + _processes_label(processes)
    return r


def dramatiq_stored_run(
    env: Env, mock: MockLLM, c: int, n: int, cap: float, processes: int = 1, fair: bool = False
) -> dict[str, Any]:
    """Dramatiq in the equal-durability form: docllm's two MariaDB writes per task (bench.peer_store);
    ``fair``: its openai connections split into pools as docllm's reviewer splits them (llm_task)."""
    set_urls(env)
    from bench import peer_dramatiq
    from bench.worker import prepare_rows, row_summary

    if env.mariadb is None:
        raise RuntimeError("the two-writes peer needs MariaDB")
    url = env.new_database("mariadb")
    ids = prepare_rows(url, n, DOCUMENT)

    def enqueue() -> None:
        for i in ids:
            peer_dramatiq.llm_stored.send(i)

    extra = {"BENCH_LLM_SPLIT": "1"} if fair else {}
    r = measure(
        env,
        mock,
        "dramatiq-durable" if fair else "dramatiq-two-writes",
        c,
        n,
        DB["dramatiq"],
        enqueue,
        _dramatiq_argv(c, processes),
        _peer_env(
            env,
            mock,
            c,
            BENCH_DRAMATIQ_URL=env.redis_url(DB["dramatiq"]),
            BENCH_DRAMATIQ_THREADS=str(c),
            BENCH_STORE_URL=url,
            **extra,
        ),
        dramatiq_drained,
        cap,
    )
    rows = row_summary(url)
    if rows["counts"].get("success") != n:
        errors = [line for line in tail(Path(r["log"]), 400).splitlines() if "rror" in line or "xception" in line]
        r["problems"].append(f"rows after the stop: {rows['counts']}; the peer's log: {errors[-6:]}")
    r["label"] = f"Dramatiq, {_processes_label(processes)}, two MariaDB writes per task" + (
        ", openai pools of <= 32" if fair else ""
    )
    return r


def _dramatiq_argv(c: int, processes: int) -> list[str]:
    """One process: the bench's own worker (``bench.peer_dramatiq``); more: Dramatiq's CLI, each
    process with C threads (as ``docllm worker --processes N`` runs each process at C)."""
    if processes == 1:
        return [PYTHON, "-m", "bench.peer_dramatiq"]
    return [PYTHON, "-m", "dramatiq", "bench.peer_dramatiq", "--processes", str(processes), "--threads", str(c)]


def _processes_label(processes: int) -> str:
    return "one process, C threads" if processes == 1 else f"{processes} processes, C threads each"


def arq_run(env: Env, mock: MockLLM, c: int, n: int, cap: float) -> dict[str, Any]:
    from bench import peer_arq

    url = env.redis_url(ARQ_DB)
    r = measure(
        env,
        mock,
        "arq",
        c,
        n,
        ARQ_DB,
        lambda: peer_arq.enqueue(url, n),
        [PYTHON, "-m", "bench.peer_arq"],
        _peer_env(env, mock, c, BENCH_ARQ_URL=url, BENCH_ARQ_MAX_JOBS=str(c)),
        lambda client: client.zcard(peer_arq.QUEUE) == 0,
        cap,
    )
    r["label"] = "arq, max_jobs C (AsyncOpenAI)"
    return r


def _peer_env(env: Env, mock: MockLLM, c: int, **extra: str) -> dict[str, str]:
    return child_env(
        BENCH_LLM_URL=mock.base_url, BENCH_LLM_CONCURRENCY=str(c), BENCH_MARK_URL=env.redis_url(0), **extra
    )


def measure(
    env: Env,
    mock: MockLLM,
    name: str,
    c: int,
    n: int,
    db: int,
    enqueue: Callable[[], None],
    argv: list[str],
    run_env: dict[str, str],
    drained: Callable[[Any], bool],
    cap: float,
) -> dict[str, Any]:
    env.flush(db)
    enqueue()
    mock.reset()
    log = env.dir / f"llm-{name}-c{c}.log"
    for k in itertools.count(2):  # one log per run (a second process count must not overwrite it)
        if not log.exists():
            break
        log = env.dir / f"llm-{name}-c{c}-{k}.log"
    result_log = log
    client = env.client(db)
    proc = spawn(argv, run_env, log)
    result: dict[str, Any] = {"name": name, "concurrency": c, "n": n, "problems": [], "log": str(result_log)}
    try:
        with Sampler([proc.pid], tree=True) as sampler:

            def started() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} worker exited with {proc.returncode}:\n{tail(log)}")
                return mock.stats()["received"] > 0

            wait_for(started, 90, 0.005, f"{name} c={c}: first LLM request")
            cpu0 = tree_cpu_seconds(proc.pid) or 0.0
            deadline = time.monotonic() + cap
            while not drained(client):
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} worker exited with {proc.returncode}:\n{tail(log)}")
                if time.monotonic() > deadline:
                    result["problems"].append(
                        f"not drained within {cap:.0f} s ({mock.stats()['answered']} LLM answers sent)"
                    )
                    break
                time.sleep(0.02)
            end = time.time()
            cpu1 = tree_cpu_seconds(proc.pid) or 0.0
        stats = mock.stats()
    finally:
        stop(proc, timeout=30)
        client.close()
    elapsed = end - stats["first"]
    done = not result["problems"]
    result.update(
        elapsed_s=elapsed,
        per_s=n / elapsed if done else None,
        answered=stats["answered"],
        max_in_flight=stats["max_in_flight"],
        cpu_ms_per_task=(cpu1 - cpu0) * 1000 / n,
        rss_peak_kib=sampler.peak.get(proc.pid),
        threads_peak=sampler.peak_threads.get(proc.pid),
    )
    result["ratio"] = result["per_s"] / (c / mock.latency) if done else None
    if stats["received"] < n:
        result["problems"].append(f"the mock got {stats['received']} chat requests for {n} tasks")
    return result


RUNNERS = (
    ("docllm", None, docllm_run),
    ("Celery", "celery", celery_run),
    ("Dramatiq", "dramatiq", dramatiq_run),
    ("arq", "arq", arq_run),
)


def run(env: Env, results: dict) -> list[Table]:
    latency = float(env.options.get("llm_latency") or (QUICK_LATENCY if env.quick else LATENCY))
    concurrencies = env.options.get("llm_concurrency") or (QUICK_CONCURRENCIES if env.quick else CONCURRENCIES)
    chosen = env.options.get("llm_workers")
    wanted = [r for r in RUNNERS if chosen is None or r[0].lower() in chosen]
    runners = [r for r in wanted if r[1] is None or installed(r[1])]
    for name, module, _ in wanted:
        if module and not installed(module):
            env.skip(
                f"LLM-bound {name}: {module} is not installed (pip install -e '.[bench]'"
                + ("; arq: pip install --no-deps arq" if module == "arq" else "")
                + ")"
            )
    with MockLLM(latency, env.dir / "llm-mock.log") as mock:
        checks = [load_check(mock, c, rounds=2 if env.quick else 4) for c in sorted(concurrencies)]
        for check in checks:
            print(
                f"   mock LLM, plain asyncio client at C={check['concurrency']}: {check['per_s']:.0f} answers/s = "
                f"{check['ratio']:.3f} of C/L",
                flush=True,
            )
        runs = []
        for c in concurrencies:
            n = 4 * c
            cap = 30 + 15 * n / c * latency
            for name, _, fn in runners:
                try:
                    r = fn(env, mock, c, n, cap)
                except Exception as exc:  # noqa: BLE001 - one broken worker must not hide the others' figures
                    r = {
                        "name": name.lower(),
                        "label": name,
                        "concurrency": c,
                        "n": n,
                        "problems": [f"failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"],
                    }
                runs.append(r)
                ratio = r.get("ratio")
                print(
                    f"   {r['label']} c={c}: "
                    + (f"{r['per_s']:.0f} tasks/s = {ratio:.3f} of C/L" if ratio else "; ".join(r["problems"])),
                    flush=True,
                )
    check = checks[-1]
    results["llm"] = {"latency_s": latency, "mock_check": check, "mock_checks": checks, "runs": runs}
    mock_table = Table(
        "llm_mock",
        f"8a. The mock LLM is not the bottleneck (latency {latency:g} s)",
        [
            "client",
            "C",
            "requests",
            "s",
            "answers/s",
            "/ (C/L)",
            "goal",
            "time above L p50 / p99 ms",
            "mock CPU ms/request",
        ],
    )
    for c in checks:
        goal = (">= 0.98 " + ("MET" if c["ratio"] >= 0.98 else "NOT MET")) if c is check else "-"
        mock_table.add(
            "plain asyncio Protocol, keep-alive",
            c["concurrency"],
            c["requests"],
            c["elapsed_s"],
            c["per_s"],
            c["ratio"],
            goal,
            f"{c['over_latency_ms_p50']:.1f} / {c['over_latency_ms_p99']:.1f}",
            c["mock_cpu_ms_per_request"],
        )
    mock_table.note(
        f"{check['rounds']} requests per connection (docllm's real prompt for the bench document), "
        "all connections open before the clock starts, all C first requests sent at once; the ratio "
        f"is about the most any worker can reach with N = {check['rounds']}C tasks (each row the "
        "ceiling for the same C in table 8). Time above L: "
        "send to answer as the client sees it, less L (the mock's queueing and the client's)."
    )
    table = Table(
        "llm",
        f"8. LLM-bound: mock LLM with a fixed {latency:g} s latency, N = 4C, one worker process",
        [
            "C",
            "worker",
            "N",
            "s",
            "tasks/s",
            "/ (C/L)",
            "/ mock ceiling (8a)",
            "CPU ms/task",
            "peak RSS MiB",
            "peak threads",
            "most in flight at the LLM",
            "problems",
        ],
    )
    ceiling = {c["concurrency"]: c["ratio"] for c in checks}
    for r in runs:
        rss = r.get("rss_peak_kib")
        share = r["ratio"] / ceiling[r["concurrency"]] if r.get("ratio") and r["concurrency"] in ceiling else None
        table.add(
            r["concurrency"],
            r["label"],
            r["n"],
            r.get("elapsed_s"),
            r.get("per_s"),
            r.get("ratio"),
            share,
            r.get("cpu_ms_per_task"),
            None if rss is None else rss / 1024,
            r.get("threads_peak"),
            r.get("max_in_flight"),
            "; ".join(r["problems"]) or "-",
        )
    table.note(
        "Window: the mock's first chat request -> every task acked (20 ms poll). CPU: the worker process "
        "over the window / N. docllm writes each attempt to its database and checks every row is success "
        "at attempt 1 afterwards; the peers write Redis only."
    )
    table.note(
        "Peers' openai clients: max_retries=0, timeout 60 s (as docllm's reviewer), connection pool sized "
        "to C; docllm uses the client its reviewer builds. Most in flight: the mock's count of requests "
        "it held at once (C when a worker keeps every slot busy)."
    )
    table.note(
        "arq's poller starts jobs one at a time (a WATCH/MULTI/EXEC transaction and reads per job, "
        "awaited in turn), which bounds its starts a second whatever max_jobs is; it polls every 0.5 s."
    )
    return [mock_table, table]
