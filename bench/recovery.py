"""6. Recovery after SIGKILL, and double starts of a live slow task.

Every scenario has two worker processes, A and B, on a Redis database of its own. Kill: A takes a
task that would run for an hour, B is started and idle, A's process group gets SIGKILL; the figure
is the time from the kill to B's start of that task (docllm: the row's ``attempt`` turns 2;
peers: the job's second ``RPUSH`` of its start time). Live: A runs a task four times its lease
(or Celery's visibility timeout) while B is idle; the figure is how many times it was started.

The scenarios wait on timers, not on the CPU, so they run at the same time, in threads.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import PYTHON, Env, Table, child_env, kill, spawn, stop, tail, verdict, wait_for
from bench.peers import installed

SHORT_LEASE, SHORT_REAPER = 3.0, 1.0
DEFAULT_LEASE, DEFAULT_REAPER = 30.0, 5.0  # Settings' defaults
LIVE_FACTOR = 4  # a live task runs this many leases (or visibility timeouts)
PEER_CAP_S = 120.0
CELERY_VISIBILITY = 5.0
RQ_AGGRESSIVE = {"BENCH_RQ_MONITOR": "1", "BENCH_RQ_MAINTENANCE": "1", "BENCH_RQ_TTL": "16"}


def blmove_waiting(client, db: int) -> bool:
    """Some connection on database ``db`` is blocked in BLMOVE: a docllm slot waits for work."""
    return any(str(c.get("db")) == str(db) and c.get("cmd") == "blmove" for c in client.client_list())


# -- docllm ---------------------------------------------------------------------------------------


def docllm_scenario(
    env: Env, db: int, lease: float, reaper: float, kill_a: bool, task_seconds: float
) -> dict[str, Any]:
    from docllm.adapters.redis.keys import RedisKeys
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.adapters.sql.repository import SqlAlchemyTaskRepository

    url = env.new_database("sqlite")
    engine = make_engine(url)
    upgrade_schema(engine)
    repo = SqlAlchemyTaskRepository(engine)
    task = repo.create("recovery", "# A document\n\nSome text.\n")
    prefix = f"rec{db}"
    client = env.client(db)
    client.flushdb()
    tag = f"recovery-docllm-db{db}"

    def worker_env(latency: float, concurrency: int) -> dict[str, str]:
        return child_env(
            DOCLLM_REDIS_URL=env.redis_url(db),
            DOCLLM_DATABASE_URL=url,
            DOCLLM_QUEUE_PREFIX=prefix,
            DOCLLM_LEASE_SECONDS=str(lease),
            DOCLLM_REAPER_INTERVAL_SECONDS=str(reaper),
            DOCLLM_CONCURRENCY=str(concurrency),
            DOCLLM_OFFLINE_LATENCY_SECONDS=str(latency),
            DOCLLM_LOG_LEVEL="WARNING",
            DOCLLM_HOME=str(env.dir / "home"),
        )

    argv = [PYTHON, "-m", "docllm.entrypoints.worker"]
    a = spawn(argv, worker_env(3600 if kill_a else task_seconds, 1), env.dir / f"{tag}-A.log")
    b = None
    try:
        client.lpush(RedisKeys(prefix).ready, f'{{"task_id": {task.task_id}, "task_name": "recovery"}}')
        wait_for(lambda: (repo.get(task.task_id).attempt or 0) >= 1, 60, 0.02, "A starts the task")
        b = spawn(argv, worker_env(0, 2), env.dir / f"{tag}-B.log")
        wait_for(lambda: blmove_waiting(client, db), 60, 0.05, "B idle")
        if kill_a:
            t0 = time.time()
            kill(a)
            wait_for(lambda: repo.get(task.task_id).attempt >= 2, lease + reaper + 60, 0.02, "B starts the task")
            recovered = time.time() - t0
            wait_for(lambda: repo.get(task.task_id).status.value == "success", 30, 0.05, "success")
            row = repo.get(task.task_id)
            return {"recovered_s": recovered, "attempts": row.attempt, "status": row.status.value}
        wait_for(
            lambda: repo.get(task.task_id).status.value in ("success", "failed"),
            task_seconds + 60,
            0.05,
            "the slow task to end",
        )
        row = repo.get(task.task_id)
        return {"starts": row.attempt, "status": row.status.value}
    except TimeoutError as exc:
        raise RuntimeError(
            f"{tag}: {exc}\nA:\n{tail(env.dir / f'{tag}-A.log')}\nB:\n{tail(env.dir / f'{tag}-B.log')}"
        ) from None
    finally:
        stop(b, 10)
        stop(a, 10)
        engine.dispose()
        client.close()


# -- peers ----------------------------------------------------------------------------------------


def peer_scenario(env: Env, peer: str, db: int, kill_a: bool, seconds: float, cap: float) -> dict[str, Any]:
    """A and B run the peer's worker; ``slow(key, seconds)`` is enqueued once."""
    key = "bench:starts"
    client = env.client(db)
    client.flushdb()
    url = env.redis_url(db)
    extra: dict[str, str] = {"BENCH_MARK_URL": url}
    if peer == "rq":
        argv = [PYTHON, "-m", "bench.peer_rq", url, "fork"]
        extra.update(RQ_AGGRESSIVE)
    elif peer == "dramatiq":
        argv = [PYTHON, "-m", "bench.peer_dramatiq"]
        extra.update(BENCH_DRAMATIQ_URL=url, BENCH_DRAMATIQ_THREADS="1")
    else:
        from bench.peers import celery_argv

        argv = celery_argv()
        extra.update(
            BENCH_CELERY_URL=url, BENCH_CELERY_VISIBILITY=str(CELERY_VISIBILITY), BENCH_CELERY_RESTORE_INTERVAL="1"
        )
    tag = f"recovery-{peer}-db{db}"
    env_ = child_env(**extra)
    a = spawn(argv, env_, env.dir / f"{tag}-A.log")
    b = None
    try:
        time.sleep(3.0)  # A up before the job exists, so that A takes it
        enqueue_slow(peer, url, key, 3600 if kill_a else seconds)
        wait_for(lambda: client.llen(key) >= 1, 60, 0.02, f"{peer}: A starts the job")
        b = spawn(argv, env_, env.dir / f"{tag}-B.log")
        time.sleep(3.0)  # B up (no cheap readiness signal common to the peers)
        if kill_a:
            t0 = time.time()
            kill(a)
            try:
                wait_for(lambda: client.llen(key) >= 2, cap, 0.05, f"{peer}: second start")
            except TimeoutError:
                return {"recovered_s": None, "cap_s": cap}
            return {"recovered_s": float(client.lindex(key, 1)) - t0, "cap_s": cap}
        time.sleep(seconds + 5.0)
        return {"starts": client.llen(key)}
    finally:
        stop(b, 10)
        stop(a, 10)
        client.flushdb()
        client.close()


def enqueue_slow(peer: str, url: str, key: str, seconds: float) -> None:
    if peer == "rq":
        from redis import Redis
        from rq import Queue, Retry

        from bench import peer_rq

        with Redis.from_url(url) as conn:
            Queue(peer_rq.QUEUE, connection=conn).enqueue(
                peer_rq.slow, key, seconds, retry=Retry(max=3), job_timeout=7200
            )
    elif peer == "dramatiq":
        from dramatiq.brokers.redis import RedisBroker

        from bench import peer_dramatiq

        broker = RedisBroker(url=url)
        broker.declare_queue(peer_dramatiq.QUEUE)
        broker.enqueue(peer_dramatiq.slow.message(key, seconds))
        broker.close()
    else:
        from bench import peer_celery

        with peer_celery.app.connection_for_write(url) as conn:
            peer_celery.slow.apply_async(args=(key, seconds), connection=conn)


# -- the table ------------------------------------------------------------------------------------


def run(env: Env, results: dict) -> list[Table]:
    from bench.peers import set_urls

    set_urls(env)
    jobs: dict[str, tuple] = {
        "docllm-short-kill": (docllm_scenario, env, 14, SHORT_LEASE, SHORT_REAPER, True, 0.0),
        "docllm-short-live": (docllm_scenario, env, 15, SHORT_LEASE, SHORT_REAPER, False, LIVE_FACTOR * SHORT_LEASE),
    }
    if env.quick:
        env.skip("recovery at the default lease (30 s) and the peers' recovery runs (up to 120 s each): --quick")
    else:
        jobs["docllm-default-kill"] = (docllm_scenario, env, 4, DEFAULT_LEASE, DEFAULT_REAPER, True, 0.0)
        peer_jobs = {
            "celery-kill": ("celery", 8, True, 0.0, PEER_CAP_S),
            "celery-live": ("celery", 9, False, LIVE_FACTOR * CELERY_VISIBILITY, 0.0),
            "dramatiq-kill": ("dramatiq", 10, True, 0.0, PEER_CAP_S),
            "dramatiq-live": ("dramatiq", 11, False, LIVE_FACTOR * CELERY_VISIBILITY, 0.0),
            "rq-kill": ("rq", 12, True, 0.0, PEER_CAP_S),
            "rq-live": ("rq", 13, False, LIVE_FACTOR * CELERY_VISIBILITY, 0.0),
        }
        for name, args in peer_jobs.items():
            if installed(args[0]):
                jobs[name] = (peer_scenario, env, *args)
            else:
                env.skip(f"recovery {name}: {args[0]} is not installed (pip install -e '.[bench]')")
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(fn, *args) for name, (fn, *args) in jobs.items()}
        out = {name: f.result() for name, f in futures.items()}
    results["recovery"] = out
    table = Table(
        "recovery",
        "6. Recovery after SIGKILL, and live slow tasks",
        ["worker and settings", "killed: s to the next start", "bound", "live slow task: starts", "met"],
    )
    for label, kill_key, live_key, lease, reaper in (
        (
            f"docllm, lease {SHORT_LEASE:g} s, reaper {SHORT_REAPER:g} s",
            "docllm-short-kill",
            "docllm-short-live",
            SHORT_LEASE,
            SHORT_REAPER,
        ),
        (
            f"docllm, defaults: lease {DEFAULT_LEASE:g} s, reaper {DEFAULT_REAPER:g} s",
            "docllm-default-kill",
            None,
            DEFAULT_LEASE,
            DEFAULT_REAPER,
        ),
    ):
        if kill_key not in out:
            continue
        k = out[kill_key]
        live = out.get(live_key) if live_key else None
        bound = lease + reaper
        ok_kill = k["recovered_s"] <= bound
        ok_live = None if live is None else live["starts"] == 1
        table.add(
            label,
            k["recovered_s"],
            f"lease + interval = {bound:g} s",
            None if live is None else f"{live['starts']} (task {LIVE_FACTOR * lease:g} s)",
            verdict(ok_kill and ok_live is not False),
        )
    peers = (
        (
            "Celery solo, acks_late, visibility_timeout 5 s, unacked restore every 1 s",
            "celery",
            "reference: ~3 s, live 30 s job started twice",
        ),
        ("Dramatiq, default broker settings", "dramatiq", "reference: not within 120 s"),
        ("RQ fork worker, monitor 1 s, maintenance 1 s, worker_ttl 16, Retry(3)", "rq", "reference: ~60 s"),
    )
    for label, peer, ref in peers:
        k, live = out.get(f"{peer}-kill"), out.get(f"{peer}-live")
        if k is None:
            continue
        shown = k["recovered_s"] if k["recovered_s"] is not None else f"not within {k['cap_s']:g} s"
        table.add(
            label,
            shown,
            ref,
            None if live is None else f"{live['starts']} (job {LIVE_FACTOR * CELERY_VISIBILITY:g} s)",
            "-",
        )
    table.note(
        "Goal (docllm): back within lease + reaper interval, and a live, heartbeating worker's task started "
        "exactly once. Killed = SIGKILL to the worker's process group, mid-attempt."
    )
    return [table]
