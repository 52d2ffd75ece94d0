"""3 and 7. The whole worker: one process (``bench.docllm_worker``: the product's Service with a
no-op reviewer), ``DOCLLM_CONCURRENCY`` 1, 8 and 32, on SQLite and on MariaDB.

Per run: N rows are inserted (pending), the worker is started on an empty queue and waited for
until its slots block in ``BLMOVE`` (idle RSS is read then), the N payloads go to ready in one
``LPUSH``, and the window runs from the first review (the no-op reviewer's one ``SET NX``) to the
moment a 5 ms poll sees ready, leases and delayed all empty (every task acked). Then every row
must be ``success`` with attempt 1. CPU seconds of the worker, redis-server and mariadbd are read
from /proc over the same window; claim-to-ack latencies come from the worker itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from bench.common import (
    PYTHON,
    Env,
    Sampler,
    Table,
    child_env,
    cpu_seconds,
    payload,
    percentile,
    rss_kib,
    spawn,
    stop,
    tail,
    wait_for,
)

PREFIX = "bench"
MARK_KEY = "bench:first_start"
CONCURRENCIES = (1, 8, 32)


def prepare_rows(url: str, n: int, document: str = "bench") -> list[int]:
    from sqlalchemy import insert, select

    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.adapters.sql.schema import task_doc_llm as t

    engine = make_engine(url)
    try:
        upgrade_schema(engine)
        with engine.begin() as conn:
            for start in range(0, n, 1000):
                rows = [
                    {"task_name": f"bench-{i}", "document": document, "status": "pending", "max_attempts": 5}
                    for i in range(start, min(n, start + 1000))
                ]
                conn.execute(insert(t), rows)
            return [row[0] for row in conn.execute(select(t.c.task_id).order_by(t.c.task_id))]
    finally:
        engine.dispose()


def row_summary(url: str) -> dict[str, Any]:
    from sqlalchemy import func, select

    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.schema import task_doc_llm as t

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            counts = dict(conn.execute(select(t.c.status, func.count()).group_by(t.c.status)).all())
            max_attempt = conn.execute(select(func.max(t.c.attempt))).scalar()
        return {"counts": counts, "max_attempt": max_attempt}
    finally:
        engine.dispose()


def worker_env(env: Env, url: str, concurrency: int, prefix: str, **extra: str) -> dict[str, str]:
    settings = {
        "DOCLLM_REDIS_URL": env.redis_url(0),
        "DOCLLM_DATABASE_URL": url,
        "DOCLLM_CONCURRENCY": str(concurrency),
        "DOCLLM_QUEUE_PREFIX": prefix,
        "DOCLLM_LOG_LEVEL": "WARNING",
        "DOCLLM_HOME": str(env.dir / "home"),
        # Every task of these benches is the same document: the review cache (issue 46) would serve
        # all but the first, and they measure the queue, not the cache (bench.review_cache does).
        "DOCLLM_REVIEW_CACHE": "off",
    }
    return child_env(**(settings | extra))  # extra may override a default (the log level)


def blocked_clients(client) -> int:
    return int(client.info("clients")["blocked_clients"])


def run_docllm(
    env: Env, backend: str, concurrency: int, n: int, during: Callable[[int], Callable[[], None]] | None = None
) -> dict[str, Any]:
    """One measured run; ``during(pid)`` is started once the worker is idle and its return value
    called when the window ends (the profiler uses it)."""
    from docllm.adapters.redis.keys import RedisKeys

    url = env.new_database(backend)
    ids = prepare_rows(url, n)
    keys = RedisKeys(PREFIX)
    client = env.client(0)
    client.flushdb()
    tag = f"docllm-{backend}-c{concurrency}"
    log = env.dir / f"{tag}.log"
    latency_file = env.dir / f"{tag}.latency.json"
    proc = spawn(
        [PYTHON, "-m", "bench.docllm_worker"],
        worker_env(
            env,
            url,
            concurrency,
            PREFIX,
            BENCH_MARK_URL=env.redis_url(0),
            BENCH_MARK_KEY=MARK_KEY,
            BENCH_LATENCY_FILE=str(latency_file),
        ),
        log,
    )
    others = {name: env.pid_of(name) for name in ("redis", "mariadb")}
    result: dict[str, Any] = {"backend": backend, "concurrency": concurrency, "n": n}
    try:
        wait_for(lambda: proc.poll() is not None or blocked_clients(client) >= 1, 60, 0.02, "worker start")
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode}:\n{tail(log)}")
        time.sleep(0.5)
        result["rss_idle_kib"] = rss_kib(proc.pid)
        finish = during(proc.pid) if during else None
        with Sampler([proc.pid]) as sampler:
            counts0 = server_counters(env, client, backend)
            client.lpush(keys.ready, *(payload(i) for i in ids))
            first = wait_for(lambda: client.get(MARK_KEY), 60, 0.002, "first task start")
            cpu0 = {"worker": cpu_seconds(proc.pid), **{k: cpu_seconds(p) for k, p in others.items() if p}}

            def drained() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"worker exited with {proc.returncode}:\n{tail(log)}")
                pipe = client.pipeline(transaction=False)
                pipe.llen(keys.ready).zcard(keys.lease_index).zcard(keys.delayed)
                return not any(pipe.execute())

            wait_for(drained, 600, 0.005, f"{n} tasks acked")
            end = time.time()
            counts1 = server_counters(env, client, backend)
            cpu1 = {"worker": cpu_seconds(proc.pid), **{k: cpu_seconds(p) for k, p in others.items() if p}}
        if finish:
            finish()
        elapsed = end - float(first)
        result.update(elapsed_s=elapsed, tasks_per_s=n / elapsed, rss_peak_kib=sampler.peak.get(proc.pid))
        result["cpu_s_per_1000"] = {
            k: (cpu1[k] - cpu0[k]) * 1000 / n for k in cpu1 if cpu1.get(k) is not None and cpu0.get(k) is not None
        }
        result["per_task"] = {k: (counts1[k] - counts0[k]) / n for k in counts1}
        result["worker_cpu_share"] = (cpu1["worker"] - cpu0["worker"]) / elapsed
    finally:
        stop(proc, timeout=30)
        client.close()
    latencies = json.loads(latency_file.read_text()) if latency_file.exists() else []
    result["latency_p50_ms"] = _ms(percentile(latencies, 50))
    result["latency_p99_ms"] = _ms(percentile(latencies, 99))
    summary = row_summary(url)
    result["rows"] = summary
    if summary["counts"].get("success") != n or summary["max_attempt"] != 1:
        raise RuntimeError(f"{tag}: rows are not all success at attempt 1: {summary}")
    return result


def server_counters(env: Env, client, backend: str) -> dict[str, int]:
    """Commands the redis-server and statements the database server have run so far."""
    counts = {"redis_commands": int(client.info("stats")["total_commands_processed"])}
    if backend == "mariadb":
        with env.mariadb.connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
            counts["db_statements"] = int(cur.fetchone()[1])
    return counts


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def backends(env: Env) -> list[str]:
    return ["sqlite"] + (["mariadb"] if env.mariadb is not None else [])


def run(env: Env, results: dict) -> list[Table]:
    n = 40 if env.quick else 2000
    runs = []
    for backend in backends(env):
        for c in CONCURRENCIES:
            r = run_docllm(env, backend, c, n)
            print(f"   docllm {backend} c={c}: {r['tasks_per_s']:.0f} tasks/s", flush=True)
            runs.append(r)
    results["worker"] = runs
    table = Table(
        "worker",
        "3. Whole worker: one docllm process, no-op reviewer, fenced DB writes",
        [
            "database",
            "DOCLLM_CONCURRENCY",
            "N",
            "tasks/s",
            "claim->ack p50 ms",
            "p99 ms",
            "worker CPU (cores)",
            "CPU s/1000 tasks: worker / redis / db",
        ],
    )
    for r in runs:
        cpu = r["cpu_s_per_1000"]
        parts = [
            f"{cpu.get('worker', 0):.2f}",
            f"{cpu.get('redis', 0):.2f}",
            f"{cpu['mariadb']:.2f}" if r["backend"] == "mariadb" and "mariadb" in cpu else "(in worker)",
        ]
        table.add(
            r["backend"],
            r["concurrency"],
            r["n"],
            r["tasks_per_s"],
            r["latency_p50_ms"],
            r["latency_p99_ms"],
            r["worker_cpu_share"],
            " / ".join(parts),
        )
    table.note(
        "Window: first review started -> all N acked (seen by a 5 ms poll); every row checked "
        "success at attempt 1 afterwards. Latency: before claim() to after ack() in the worker."
    )
    mem = Table(
        "memory", "7. Memory: docllm worker VmRSS (MiB)", ["database", "DOCLLM_CONCURRENCY", "idle", "peak under load"]
    )
    for r in runs:
        mem.add(r["backend"], r["concurrency"], _mib(r.get("rss_idle_kib")), _mib(r.get("rss_peak_kib")))
    mem.note("Idle: 0.5 s after the slots first block in BLMOVE, queue empty. Peak: 50 ms samples during the run.")
    return [table, mem]


def _mib(kib: int | None) -> float | None:
    return None if kib is None else kib / 1024
