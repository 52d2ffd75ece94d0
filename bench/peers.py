"""4. Peers on the same redis-server, same no-op job, same N, one worker process each:
RQ (fork ``Worker`` and ``SimpleWorker``), Dramatiq (default prefetch and a large one, 8 threads),
Celery (solo pool, ``acks_late``). Each has a Redis database of its own.

Same window as docllm's (table 3): the N jobs are enqueued before the worker starts; the window
runs from the first job's start (its one ``SET NX``) to the moment a 5 ms poll sees every job
acknowledged (RQ: N in the finished registry; Dramatiq: queue and message hash empty; Celery:
queue and ``unacked`` empty).
"""

from __future__ import annotations

import importlib.util
import os
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
    spawn,
    stop,
    tail,
    tree_cpu_seconds,
    wait_for,
)
from bench.peer_marks import MARK_KEY

DB = {"rq": 1, "dramatiq": 2, "celery": 3}
DRAMATIQ_LARGE_PREFETCH = 1000


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def set_urls(env: Env) -> None:
    """The peer modules read their broker URL at import."""
    os.environ.setdefault("BENCH_DRAMATIQ_URL", env.redis_url(DB["dramatiq"]))
    os.environ.setdefault("BENCH_CELERY_URL", env.redis_url(DB["celery"]))


def measure(
    env: Env,
    name: str,
    db: int,
    n: int,
    enqueue: Callable[[], None],
    argv: list[str],
    drained: Callable[[Any], bool],
    tree: bool = False,
    **extra_env: str,
) -> dict[str, Any]:
    """One run; ``tree``: CPU and RSS include the worker's children (a prefork pool)."""
    env.flush(db)
    client = env.client(db)
    enqueue()
    log = env.dir / f"peer-{name}.log"
    proc = spawn(argv, child_env(BENCH_MARK_URL=env.redis_url(db), **extra_env), log)
    redis_pid = env.pid_of("redis")
    try:
        cpu = tree_cpu_seconds if tree else cpu_seconds
        with Sampler([proc.pid], tree=tree) as sampler:

            def marked():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} worker exited with {proc.returncode}:\n{tail(log)}")
                return client.get(MARK_KEY)

            first = float(wait_for(marked, 120, 0.002, f"{name}: first job"))
            cpu0 = (cpu(proc.pid), cpu_seconds(redis_pid))

            def done() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} worker exited with {proc.returncode}:\n{tail(log)}")
                return drained(client)

            wait_for(done, 900, 0.005, f"{name}: {n} jobs acked")
            end = time.time()
            cpu1 = (cpu(proc.pid), cpu_seconds(redis_pid))
    finally:
        stop(proc, timeout=15)
        client.close()
    elapsed = end - first
    cpu_worker = (cpu1[0] - cpu0[0]) if None not in (cpu0[0], cpu1[0]) else None
    cpu_redis = (cpu1[1] - cpu0[1]) if None not in (cpu0[1], cpu1[1]) else None
    return {
        "name": name,
        "n": n,
        "elapsed_s": elapsed,
        "per_s": n / elapsed,
        "rss_peak_kib": sampler.peak.get(proc.pid),
        "cpu_s_per_1000": {
            "worker": None if cpu_worker is None else cpu_worker * 1000 / n,
            "redis": None if cpu_redis is None else cpu_redis * 1000 / n,
        },
    }


def rq_runs(env: Env, n: int) -> list[dict[str, Any]]:
    from redis import Redis
    from rq import Queue

    from bench import peer_rq

    url = env.redis_url(DB["rq"])
    runs = []
    for kind, label in (("fork", "RQ Worker (fork per job)"), ("simple", "RQ SimpleWorker")):
        conn = Redis.from_url(url)
        queue = Queue(peer_rq.QUEUE, connection=conn)

        def enqueue(conn: Redis = conn, queue: Queue = queue) -> None:
            for start in range(0, n, 500):
                with conn.pipeline() as pipe:
                    queue.enqueue_many(
                        [Queue.prepare_data(peer_rq.noop, result_ttl=3600) for _ in range(start, min(n, start + 500))],
                        pipeline=pipe,
                    )
                    pipe.execute()

        r = measure(
            env,
            f"rq-{kind}",
            DB["rq"],
            n,
            enqueue,
            [PYTHON, "-m", "bench.peer_rq", url, kind],
            lambda _c, queue=queue: queue.finished_job_registry.count >= n,
        )
        r.update(label=label, concurrency=1)
        runs.append(r)
        conn.close()
    return runs


def dramatiq_drained(client) -> bool:
    """Dramatiq's queue list and its message hash are empty: every message acked."""
    from bench import peer_dramatiq

    ns, q = peer_dramatiq.broker.namespace, peer_dramatiq.QUEUE
    pipe = client.pipeline(transaction=False)
    pipe.llen(f"{ns}:{q}").hlen(f"{ns}:{q}.msgs")
    return not any(pipe.execute())


def celery_drained(client) -> bool:
    """Celery's queue list and kombu's ``unacked`` hash are empty: every message acked."""
    from bench import peer_celery

    pipe = client.pipeline(transaction=False)
    pipe.llen(peer_celery.QUEUE).hlen("unacked")
    return not any(pipe.execute())


def dramatiq_runs(env: Env, n: int) -> list[dict[str, Any]]:
    set_urls(env)
    from bench import peer_dramatiq

    def enqueue() -> None:
        for _ in range(n):
            peer_dramatiq.noop.send()

    drained = dramatiq_drained

    runs = []
    for prefetch, label in (
        (None, "Dramatiq, default prefetch (threads x 2 = 16)"),
        (DRAMATIQ_LARGE_PREFETCH, f"Dramatiq, prefetch {DRAMATIQ_LARGE_PREFETCH}"),
    ):
        extra = {"BENCH_DRAMATIQ_URL": env.redis_url(DB["dramatiq"]), "BENCH_DRAMATIQ_THREADS": "8"}
        if prefetch:
            extra["dramatiq_queue_prefetch"] = str(prefetch)
        r = measure(
            env,
            f"dramatiq-{prefetch or 'default'}",
            DB["dramatiq"],
            n,
            enqueue,
            [PYTHON, "-m", "bench.peer_dramatiq"],
            drained,
            **extra,
        )
        r.update(label=label, concurrency=8)
        runs.append(r)
    return runs


def celery_argv(pool: str = "solo", concurrency: int = 1) -> list[str]:
    return [
        PYTHON,
        "-m",
        "celery",
        "-A",
        "bench.peer_celery",
        "worker",
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-Q",
        "bench",
        "-l",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def celery_runs(env: Env, n: int) -> list[dict[str, Any]]:
    set_urls(env)
    from bench import peer_celery

    def enqueue() -> None:
        for _ in range(n):
            peer_celery.noop.apply_async()

    r = measure(
        env,
        "celery-solo",
        DB["celery"],
        n,
        enqueue,
        celery_argv(),
        celery_drained,
        BENCH_CELERY_URL=env.redis_url(DB["celery"]),
    )
    r.update(label="Celery, solo pool, acks_late (prefetch multiplier 4)", concurrency=1)
    runs = [r]
    if env.mariadb is None:
        env.skip("Celery with a MySQL result backend: MariaDB is not installed")
        return runs

    def enqueue_stored() -> None:  # the sender's ignore_result travels in the message: turn it off
        for _ in range(n):
            peer_celery.noop.apply_async(ignore_result=False)

    for c in (1, 8):  # the equal-durability peer: every job's state written to MariaDB, as docllm's
        result_url = "db+" + env.new_database("mariadb").split("?")[0]
        r = measure(
            env,
            f"celery-mysql-c{c}",
            DB["celery"],
            n,
            enqueue_stored,
            celery_argv("prefork", c),
            celery_drained,
            tree=True,
            BENCH_CELERY_URL=env.redis_url(DB["celery"]),
            BENCH_CELERY_RESULT_URL=result_url,
        )
        stored = celery_results(env, result_url)
        if stored.get("SUCCESS") != n:
            raise RuntimeError(f"Celery MySQL c={c}: results stored {stored}, expected {n} SUCCESS")
        r.update(label=f"Celery, prefork {c}, acks_late, track_started, MySQL result backend", concurrency=c)
        runs.append(r)
    return runs


def celery_results(env: Env, result_url: str) -> dict[str, int]:
    """Rows of Celery's result table by status."""
    database = result_url.rsplit("/", 1)[1]
    with env.mariadb.connect(database) as conn, conn.cursor() as cur:
        cur.execute("SELECT status, COUNT(*) FROM celery_taskmeta GROUP BY status")
        return {status: count for status, count in cur.fetchall()}


def run(env: Env, results: dict) -> list[Table]:
    n = 40 if env.quick else 2000
    runs: list[dict[str, Any]] = []
    for name, module, fn in (
        ("RQ", "rq", rq_runs),
        ("Dramatiq", "dramatiq", dramatiq_runs),
        ("Celery", "celery", celery_runs),
    ):
        if not installed(module):
            env.skip(f"{name} throughput: {module} is not installed (pip install -e '.[bench]')")
            continue
        for r in fn(env, n):
            print(f"   {r['label']}: {r['per_s']:.0f} jobs/s", flush=True)
            runs.append(r)
    results["peers"] = runs
    docllm = {(r["backend"], r["concurrency"]): r["tasks_per_s"] for r in results.get("worker", [])}
    table = Table(
        "peers",
        "4. Peers and docllm, side by side (one worker process each, same Redis, same N)",
        [
            "worker",
            "concurrency",
            "N",
            "jobs/s",
            "docllm SQLite / peer",
            "docllm MariaDB / peer",
            "worker CPU s/1000",
            "peak RSS MiB",
            "reference",
        ],
    )
    refs = {
        "rq-fork": "96",
        "rq-simple": "282",
        "dramatiq-default": "270",
        f"dramatiq-{DRAMATIQ_LARGE_PREFETCH}": "~4,700",
        "celery-solo": "~1,230",
    }
    for r in runs:
        c = 8 if r["concurrency"] == 8 else 1
        ratio = lambda b, c=c, r=r: f"{docllm[(b, c)] / r['per_s']:.2f} x" if (b, c) in docllm else None  # noqa: E731
        table.add(
            r["label"],
            r["concurrency"],
            r["n"],
            r["per_s"],
            ratio("sqlite"),
            ratio("mariadb"),
            r["cpu_s_per_1000"]["worker"],
            None if r["rss_peak_kib"] is None else r["rss_peak_kib"] / 1024,
            refs.get(r["name"], "-"),
        )
    for (backend, c), rate in sorted(docllm.items()):
        if c in (1, 8):
            table.add(f"docllm worker, {backend} (table 3)", c, None, rate, None, None, None, None, "-")
    table.note(
        "Ratios compare docllm at the same concurrency (1 against RQ and Celery, 8 against Dramatiq's 8 "
        "threads and Celery prefork 8); docllm also writes every attempt to its database (two fenced "
        "UPDATEs and a SELECT), the peers write nothing but Redis, except Celery with the MySQL result "
        "backend (the equal-durability peer): it writes STARTED and then SUCCESS to MariaDB per job "
        "(track_started, acks_late, prefork; CPU and RSS include its pool's children)."
    )
    return [table]
