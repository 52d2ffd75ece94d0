"""Issue 29 (capacity) and 31 (MySQL for a fleet): what one worker process and one task cost
Redis and MariaDB, with up to 120 worker processes, and the fleet sizes that follow.

    python -m bench capacity                                   # P = 1, 25, 50, 100, 120; C = 4; L = 10 s
    python -m bench capacity --processes-list 1 50 150 --llm-latency 5
    python -m bench capacity --quick                           # P = 1, 3; L = 0.2 s (the smoke test)

One redis-server, one MariaDB, the mock LLM (``bench.llm_mock``) and a fleet (``bench.fleet``) of
``docllm worker`` processes at ``DOCLLM_CONCURRENCY`` = C, grown step by step (a step's processes
stay for the next). At each step P:

- idle: every process registered, SETTLE_S more, then a window of IDLE_S on an empty queue:
  Redis commands/s (``total_commands_processed``) and redis-server CPU, MariaDB Questions/s and
  mariadbd CPU, per process; Redis clients (``connected_clients``) and MariaDB connections
  (``Threads_connected``) per process, the bench's own subtracted; mean RSS and PSS per process.
- busy: N = ROUNDS x P x C rows, their payloads pushed to ready at once; the window runs from the
  push to every task acked (ready, leases, delayed empty). Per task: redis-server, mariadbd and
  worker CPU, Redis commands, Com_commit, Questions, redo bytes (``Innodb_os_log_written``), the
  bench's own commands and statements subtracted; a per-task figure is all the server did in the
  window / N, the fleet's background polling included (busy slots do not poll, so there is no clean
  "marginal" figure to subtract: an upper bound). The servers' load over the window as a share of
  one core gives the fleet sizes (``capacity_fleet``). Peaks of both servers' connections (100 ms
  samples); tasks/s against the ideal P x C / L. Every row must end success at attempt 1.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from bench.common import Env, Table, cpu_seconds, payload, wait_for
from bench.fleet import Fleet
from bench.idle_redis import commandstats
from bench.llm_mock_client import MockLLM
from bench.llm_task import DOCUMENT, MODEL
from bench.store_load import _connected, _status
from bench.worker import prepare_rows, row_summary, worker_env

PREFIX = "capacity"
CONCURRENCY = 4
LEVELS, QUICK_LEVELS = (1, 25, 50, 100, 120), (1, 3)
LATENCY, QUICK_LATENCY = 10.0, 0.2  # long enough that the mock LLM, not 2 shared cores, bounds 480 slots
ROUNDS, QUICK_ROUNDS = 3, 2
SETTLE_S, IDLE_S = 5.0, 15.0
QUICK_SETTLE_S, QUICK_IDLE_S = 1.0, 3.0
POLL_S, PEAK_S = 0.05, 0.1
COUNTERS = ("Com_commit", "Questions", "Innodb_os_log_written")
BUDGET = 0.5  # share of one core (Redis) or of mariadbd's cores we plan to use: the rest is headroom


def reading(env: Env, client, conn, fleet: Fleet) -> dict[str, float]:
    """Both servers' counters and CPU at one moment (two MariaDB statements, one Redis INFO)."""
    info = client.info()
    return {
        "t": time.monotonic(),
        "redis_commands": int(info["total_commands_processed"]),
        "redis_clients": int(info["connected_clients"]),
        "redis_cpu": cpu_seconds(env.redis.pid) or 0.0,
        "mariadb_cpu": cpu_seconds(env.mariadb.pid) or 0.0,
        "workers_cpu": fleet.cpu_seconds(),
        "threads_connected": _connected(conn),
        **_status(conn, COUNTERS),
    }


class Peaks:
    """The most Redis clients and MariaDB connections seen, sampled in a thread on connections of
    its own (counted in ``base`` and subtracted); ``samples`` = its own INFO and SHOW calls."""

    def __init__(self, env: Env, engine):
        self.env, self.engine = env, engine
        self.redis = self.mariadb = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.env.client(0) as client, self.engine.connect() as conn:
            while not self._stop.wait(PEAK_S):
                self.redis = max(self.redis, int(client.info("clients")["connected_clients"]))
                self.mariadb = max(self.mariadb, _connected(conn))
                self.samples += 1

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def idle(env: Env, client, conn, fleet: Fleet, base: dict, settle: float, seconds: float) -> dict[str, Any]:
    time.sleep(settle)
    calls0 = commandstats(client)
    a = reading(env, client, conn, fleet)
    time.sleep(seconds)
    fleet.check()
    b = reading(env, client, conn, fleet)
    calls = Counter(commandstats(client)) - Counter(calls0)
    w, p = b["t"] - a["t"], len(fleet.pids)
    return {
        "top": ", ".join(f"{k} {v / w / p:.1f}" for k, v in calls.most_common(5) if k != "info"),
        "window_s": w,
        "redis_commands_per_s": (b["redis_commands"] - a["redis_commands"] - 1) / w / p,  # less one INFO
        "redis_cpu_pct": 100 * (b["redis_cpu"] - a["redis_cpu"]) / w / p,
        "mariadb_questions_per_s": (b["Questions"] - a["Questions"] - 2) / w / p,  # less two SHOWs
        "mariadb_cpu_pct": 100 * (b["mariadb_cpu"] - a["mariadb_cpu"]) / w / p,
        "worker_cpu_pct": 100 * (b["workers_cpu"] - a["workers_cpu"]) / w / p,
        "redis_clients": (b["redis_clients"] - base["redis_clients"]) / p,
        "mariadb_connections": (b["threads_connected"] - base["threads_connected"]) / p,
        **{f"{k}_mib": v / 1024 for k, v in fleet.memory_kib().items()},
    }


def busy(
    env: Env, client, conn, engine, fleet: Fleet, base: dict, url: str, n: int, cap: float, idle_r: dict
) -> dict[str, Any]:
    from docllm.adapters.redis.keys import RedisKeys

    keys = RedisKeys(PREFIX)
    ids = prepare_rows(url, n, DOCUMENT)[-n:]  # the database keeps the earlier steps' rows
    polls, pushes, problems = 0, 0, []
    with Peaks(env, engine) as peaks:
        a = reading(env, client, conn, fleet)
        for start in range(0, n, 1000):
            client.lpush(keys.ready, *(payload(i) for i in ids[start : start + 1000]))
            pushes += 1

        def drained() -> bool:
            nonlocal polls
            fleet.check()
            polls += 1
            pipe = client.pipeline(transaction=False)
            pipe.llen(keys.ready).zcard(keys.lease_index).zcard(keys.delayed)
            return not any(pipe.execute())

        try:
            wait_for(drained, cap, POLL_S, f"{n} tasks acked")
        except TimeoutError as exc:
            problems.append(str(exc))
        b = reading(env, client, conn, fleet)
    w, p = b["t"] - a["t"], len(fleet.pids)
    own_commands = 1 + pushes + 3 * polls + peaks.samples  # INFO, LPUSHes, polls, the sampler's INFOs
    own_questions = 2 + peaks.samples
    redis_cpu = b["redis_cpu"] - a["redis_cpu"]
    mariadb_cpu = b["mariadb_cpu"] - a["mariadb_cpu"]
    return {
        "n": n,
        "window_s": w,
        "per_s": n / w,
        "ideal_per_s": None,  # set by the caller, who knows L
        # per task: everything the servers did in the window, the fleet's background included
        "redis_cpu_ms": redis_cpu * 1000 / n,
        "mariadb_cpu_ms": mariadb_cpu * 1000 / n,
        "worker_cpu_ms": (b["workers_cpu"] - a["workers_cpu"]) * 1000 / n,
        "redis_commands": (b["redis_commands"] - a["redis_commands"] - own_commands) / n,
        # the whole fleet's load on each server over the window, in % of one core
        "redis_cpu_pct": 100 * redis_cpu / w,
        "mariadb_cpu_pct": 100 * mariadb_cpu / w,
        "com_commit": (b["Com_commit"] - a["Com_commit"]) / n,
        "questions": (b["Questions"] - a["Questions"] - own_questions) / n,
        "redo_bytes": (b["Innodb_os_log_written"] - a["Innodb_os_log_written"]) / n,
        "redis_clients_peak": (peaks.redis - 1 - base["redis_clients"]) / p,  # less the sampler's own
        "mariadb_connections_peak": (peaks.mariadb - 1 - base["threads_connected"]) / p,
        "rows": row_summary(url),
        "problems": problems,
    }


def run(env: Env, results: dict) -> list[Table]:
    if env.mariadb is None:
        env.skip("capacity: needs MariaDB")
        return []
    import sqlalchemy as sa

    o, q = env.options, env.quick
    levels = sorted(o.get("processes_list") or (QUICK_LEVELS if q else LEVELS))
    latency = float(o.get("llm_latency") or (QUICK_LATENCY if q else LATENCY))
    rounds = QUICK_ROUNDS if q else ROUNDS
    settle, seconds = (QUICK_SETTLE_S, QUICK_IDLE_S) if q else (SETTLE_S, IDLE_S)
    env.flush()
    url = env.new_database("mariadb")
    prepare_rows(url, 0)  # the schema, before any worker checks it
    engine = sa.create_engine(env.mariadb.url_for("mysql"), poolclass=sa.pool.NullPool)
    steps: list[dict[str, Any]] = []
    done = 0
    with (
        MockLLM(latency, env.dir / "capacity-mock.log") as mock,
        env.client(0) as client,
        engine.connect() as conn,
    ):
        run_env = worker_env(
            env,
            url,
            CONCURRENCY,
            PREFIX,
            DOCLLM_LLM_PROVIDER="openai",
            DOCLLM_LLM_BASE_URL=mock.base_url,
            DOCLLM_LLM_API_KEY="bench",
            DOCLLM_LLM_MODEL=MODEL,
        )
        from docllm.adapters.redis.keys import RedisKeys
        from docllm.settings import Settings

        grace = Settings.shutdown_grace_seconds
        with Fleet(run_env, RedisKeys(PREFIX).workers, client, env.dir / "capacity", grace) as fleet:
            base = reading(env, client, conn, fleet)  # no worker yet: the bench's own connections
            limits = {
                "maxclients": int(client.config_get("maxclients")["maxclients"]),
                "max_connections": int(conn.execute(sa.text("SELECT @@max_connections")).scalar()),
            }
            for p in levels:
                start_s = fleet.grow(p)
                step: dict[str, Any] = {"processes": p, "start_s": start_s}
                step["idle"] = idle(env, client, conn, fleet, base, settle, seconds)
                step["load"] = _loadavg()  # after the idle window, before the busy one
                n = rounds * p * CONCURRENCY
                cap = 60 + 10 * rounds * latency
                step["busy"] = b = busy(env, client, conn, engine, fleet, base, url, n, cap, step["idle"])
                done += n
                b["ideal_per_s"] = p * CONCURRENCY / latency
                if b["rows"]["counts"].get("success") != done or b["rows"]["max_attempt"] != 1:
                    b["problems"].append(f"rows: {b['rows']}")
                steps.append(step)
                print(_line(step), flush=True)
            killed = fleet.stop()
    engine.dispose()
    results["capacity"] = {
        "concurrency": CONCURRENCY,
        "latency_s": latency,
        "rounds": rounds,
        "steps": steps,
        "limits": limits,
        "killed_at_stop": killed,  # pids that needed SIGKILL after the grace
    }
    return [_costs(steps, latency), _fleet(steps, latency, limits)]


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _line(s: dict) -> str:
    i, b = s["idle"], s["busy"]
    return (
        f"   P={s['processes']}: idle {i['redis_commands_per_s']:.1f} Redis cmds/s and "
        f"{i['redis_cpu_pct']:.3f}% Redis CPU per process; busy {b['per_s']:.1f} tasks/s "
        f"(ideal {b['ideal_per_s']:.0f}), Redis {b['redis_cpu_ms']:.3f} ms/task, MariaDB "
        f"{b['mariadb_cpu_ms']:.3f} ms/task, {b['com_commit']:.3f} commits/task"
        + (f"; problems: {b['problems']}" if b["problems"] else "")
    )


def _costs(steps: list[dict], latency: float) -> Table:
    t = Table(
        "capacity",
        f"Capacity: costs per idle worker process and per task, C = {CONCURRENCY}, mock LLM L = {latency:g} s",
        [
            "P",
            "load avg",
            "idle Redis cmds/s /proc",
            "idle Redis CPU % /proc",
            "idle MariaDB Questions/s /proc",
            "idle mariadbd CPU % /proc",
            "idle worker CPU % /proc",
            "Redis clients /proc (peak)",
            "MariaDB conns /proc (peak)",
            "RSS / PSS MiB /proc",
            "tasks/s (ideal)",
            "Redis % of a core: idle / busy",
            "Redis CPU ms/task",
            "Redis cmds/task",
            "mariadbd % of a core busy",
            "mariadbd CPU ms/task",
            "Com_commit/task",
            "Questions/task",
            "redo bytes/task",
            "worker CPU ms/task",
            "problems",
        ],
    )
    for s in steps:
        i, b = s["idle"], s["busy"]
        t.add(
            s["processes"],
            s["load"],
            i["redis_commands_per_s"],
            i["redis_cpu_pct"],
            i["mariadb_questions_per_s"],
            i["mariadb_cpu_pct"],
            i["worker_cpu_pct"],
            f"{i['redis_clients']:.2f} ({b['redis_clients_peak']:.2f})",
            f"{i['mariadb_connections']:.2f} ({b['mariadb_connections_peak']:.2f})",
            f"{i['rss_mib']:.0f} / {i['pss_mib']:.0f}",
            f"{b['per_s']:.1f} ({b['ideal_per_s']:.0f})",
            f"{i['redis_cpu_pct'] * s['processes']:.2f} / {b['redis_cpu_pct']:.2f}",
            b["redis_cpu_ms"],
            b["redis_commands"],
            b["mariadb_cpu_pct"],
            b["mariadb_cpu_ms"],
            b["com_commit"],
            b["questions"],
            b["redo_bytes"],
            b["worker_cpu_ms"],
            "; ".join(b["problems"]) or "-",
        )
    t.note(
        f"Idle: {steps[0]['idle']['window_s']:.0f} s on an empty queue after every process registered; per "
        "process = the server's figure / P. Busy: N = rounds x P x C tasks pushed at once, window from the "
        "push to all acked; the bench's own commands and statements subtracted; per-task figures are "
        "all the server did in the window / N, the fleet's background included (an upper bound). Peaks: "
        "100 ms samples during the busy window. Load average: read after the idle window, before the busy one."
    )
    last = steps[-1]
    t.note(
        f"Idle Redis calls per process a second at P = {last['processes']} (INFO commandstats, which counts "
        f"the calls inside scripts too): {last['idle']['top']}."
    )
    return t


def _fleet(steps: list[dict], latency: float, limits: dict[str, int]) -> Table:
    """The largest step's costs turned into fleet sizes (the arithmetic docs/CAPACITY.md explains)."""
    from docllm.settings import Settings

    s = steps[-1]
    i, b = s["idle"], s["busy"]
    rate = CONCURRENCY / latency  # tasks/s one process carries when the LLM is the bound
    t = Table(
        "capacity_fleet",
        f"Fleet sizes from P = {s['processes']}: CPU at {BUDGET:.0%} of one core of each server, connections at "
        f"the servers' limits; each process at C = {CONCURRENCY} and L = {latency:g} s ({rate:g} tasks/s)",
        ["resource", "per idle process", "per task (all / N)", "per busy process", "limit", "processes at the limit"],
    )
    for name, idle_pct, busy_pct, task_ms in (
        ("Redis CPU", i["redis_cpu_pct"], b["redis_cpu_pct"], b["redis_cpu_ms"]),
        ("MariaDB CPU", i["mariadb_cpu_pct"], b["mariadb_cpu_pct"], b["mariadb_cpu_ms"]),
    ):
        per_process = busy_pct / 100 / s["processes"]  # cores, at this C/L, background included
        t.add(
            name,
            f"{idle_pct / 100 * 1000:.3f} ms/s",
            f"{task_ms:.3f} ms",
            f"{per_process * 1000:.3f} ms/s",
            f"{BUDGET * 1000:.0f} ms/s",
            int(BUDGET / per_process) if per_process > 0 else None,
        )
    pool = Settings.store_connections
    for name, idle_n, peak, limit in (
        ("Redis clients", i["redis_clients"], b["redis_clients_peak"], limits["maxclients"]),
        ("MariaDB connections", i["mariadb_connections"], b["mariadb_connections_peak"], limits["max_connections"]),
        (f"MariaDB connections, pool bound ({pool})", None, float(pool), limits["max_connections"]),
    ):
        t.add(name, idle_n, None, peak, limit, int(limit / peak) if peak > 0 else None)
    t.note(
        "CPU: processes = budget / (the server's CPU over the busy window / P), at this C/L; Redis uses one "
        "core whatever the host has. Connections: processes = the server's limit (CONFIG GET maxclients, "
        "@@max_connections) / the per-process peak; the pool bound (DOCLLM_STORE_CONNECTIONS) is the worst case."
    )
    return t
