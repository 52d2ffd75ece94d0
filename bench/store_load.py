"""Issue 31: the store traffic per task, read from MariaDB's own counters.

    python -m bench store-load                 # docllm at C = 1024 (1 and 2 processes) and C = 64, L = 1 s
    python -m bench store-load --quick         # C = 16, L = 0.2 s

Per run: ``SHOW GLOBAL STATUS`` deltas of Com_commit and Questions per task, the peak of
Threads_connected (sampled every 50 ms, the bench's own connections subtracted), throughput, and
CPU ms per task of the worker tree and of mariadbd. It reuses table 8's docllm runner
(``bench.llm.docllm_run``): the same mock LLM, tasks and window.

Not built yet (issue 31 asks for them): the Dramatiq peer with docllm's two MariaDB writes, and
claim-to-start p50 at C = 64.
"""

from __future__ import annotations

import threading
from typing import Any

from bench.common import Env, Table
from bench.hotpath import one
from bench.llm_mock_client import MockLLM

COUNTERS = ("Com_commit", "Questions")


def _status(conn) -> dict[str, int]:
    import sqlalchemy as sa

    rows = conn.execute(sa.text("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit','Questions')")).all()
    return {name: int(value) for name, value in rows}


def _connected(conn) -> int:
    import sqlalchemy as sa

    return int(conn.execute(sa.text("SHOW GLOBAL STATUS LIKE 'Threads_connected'")).one()[1])


def measured(env: Env, mock: MockLLM, c: int, processes: int) -> dict[str, Any]:
    import sqlalchemy as sa

    engine = sa.create_engine(env.mariadb.url_for("mysql"), poolclass=sa.pool.NullPool)
    peak, stop = [0], threading.Event()
    with engine.connect() as conn:
        baseline = _connected(conn)  # the bench's own connection(s)

        def sample() -> None:
            with engine.connect() as c2:
                while not stop.wait(0.05):
                    peak[0] = max(peak[0], _connected(c2) - baseline - 1)

        sampler = threading.Thread(target=sample, daemon=True)
        before = _status(conn)
        sampler.start()
        r = one(env, mock, "docllm", c, processes)
        stop.set()
        sampler.join(2)
        after = _status(conn)
    engine.dispose()
    n = r["n"]
    r["per_task"] = {k: (after[k] - before[k]) / n for k in COUNTERS}
    r["connections_peak"] = peak[0]
    return r


def run(env: Env, results: dict) -> list[Table]:
    if env.mariadb is None:
        env.skip("store-load: needs MariaDB")
        return []
    latency = 0.2 if env.quick else 1.0
    configs = [(16, 1)] if env.quick else [(1024, 1), (1024, 2), (64, 1)]
    runs = []
    with MockLLM(latency, env.dir / "store-load-mock.log") as mock:
        for c, procs in configs:
            r = measured(env, mock, c, procs)
            r["latency"] = latency
            runs.append(r)
            print(f"   C={c} p={procs}: {r.get('per_s', 0):.0f}/s, {r['per_task']}, peak {r['connections_peak']}")
    results["store_load"] = {"runs": runs}
    t = Table(
        "store_load",
        "Issue 31: MariaDB's counters per task (SHOW GLOBAL STATUS deltas over the run)",
        [
            "L s",
            "C",
            "processes",
            "tasks/s",
            "Com_commit/task",
            "Questions/task",
            "Threads_connected peak",
            "worker CPU ms/task",
            "mariadbd CPU ms/task",
            "problems",
        ],
    )
    for r in runs:
        t.add(
            r["latency"],
            r["concurrency"],
            r["processes"],
            r.get("per_s"),
            r["per_task"]["Com_commit"],
            r["per_task"]["Questions"],
            r["connections_peak"],
            r.get("cpu_ms_per_task"),
            r["server_cpu_ms_per_task"].get("mariadbd"),
            "; ".join(r.get("problems") or []) or None,
        )
    return [t]
