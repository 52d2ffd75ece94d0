"""Issue 31: the store traffic per task, read from MariaDB's own counters.

    python -m bench store-load                                   # this checkout's docllm, and the peer
    python -m bench store-load --before-src /path/to/old/src --repeats 2   # before/after, interleaved
    python -m bench store-load --c 256 --before-src OLD/src --repeats 3   # one concurrency
    python -m bench store-load --quick                           # C = 16, L = 0.2 s

Per run: ``SHOW GLOBAL STATUS`` deltas of Com_commit and Questions per task, the peak of
Threads_connected (sampled every 50 ms, the bench's own connections subtracted), throughput, and
CPU ms per task of the worker tree and of mariadbd. It reuses table 8's runners (``bench.llm``):
the same mock LLM, tasks and window. Configurations: docllm at C = 1,024 (1 and 2 processes),
256 and 64 (1 process), and the Dramatiq peer with docllm's two MariaDB writes
(``bench.peer_store``) at C = 1,024. With ``--before-src``, each docllm configuration also runs
that source tree's docllm, the two in alternating order per repeat.

Claim-to-start (C <= 64 only): those runs log JSON at DEBUG, and the p50/p95 is read from the time
between a delivery's ``claimed`` line and its ``started`` line (paired by lease token; the
``started`` event carries the token since issue 31). Both sides of a comparison log the same way.
"""

from __future__ import annotations

import os
import statistics
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import ROOT, Env, Table
from bench.hotpath import one
from bench.llm import docllm_run, dramatiq_stored_run
from bench.llm_mock_client import MockLLM

COUNTERS = ("Com_commit", "Questions")
START_LATENCY_MAX_C = 64  # DEBUG logs at larger C would cost the worker CPU the figures measure


def _status(conn, names: tuple[str, ...] = COUNTERS) -> dict[str, int]:
    import sqlalchemy as sa

    listed = ",".join(f"'{name}'" for name in names)  # the callers' constants, never input
    rows = conn.execute(sa.text(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({listed})")).all()
    return {name: int(value) for name, value in rows}


def _connected(conn) -> int:
    import sqlalchemy as sa

    return int(conn.execute(sa.text("SHOW GLOBAL STATUS LIKE 'Threads_connected'")).one()[1])


def claim_to_start_ms(log: Path) -> list[float]:
    """Milliseconds from each ``claimed`` JSON line to the ``started`` line with its token."""
    from tests.e2e.harness.logs import json_lines

    claimed: dict[str, datetime] = {}
    waits = []
    for rec in json_lines(log):
        event, token = rec.get("event"), rec.get("token")
        if token is None:
            continue
        at = datetime.fromisoformat(rec["ts"])
        if event == "claimed":
            claimed[token] = at
        elif event == "started" and token in claimed:
            waits.append((at - claimed.pop(token)).total_seconds() * 1000)
    return waits


def measured(env: Env, mock: MockLLM, c: int, processes: int, side: str, src: str | None) -> dict[str, Any]:
    import sqlalchemy as sa

    extra: dict[str, str] = {}
    if src is not None:
        extra["PYTHONPATH"] = os.pathsep.join([src, str(ROOT)])
    if c <= START_LATENCY_MAX_C:
        extra.update(DOCLLM_LOG_FORMAT="json", DOCLLM_LOG_LEVEL="DEBUG")
    if side == "peer":
        runner = dramatiq_stored_run
    else:

        def runner(e: Env, m: MockLLM, c: int, n: int, cap: float) -> dict[str, Any]:
            return docllm_run(e, m, c, n, cap, processes, **extra)

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
        r = one(env, mock, "docllm", c, processes, runner)
        stop.set()
        sampler.join(2)
        after = _status(conn)
    engine.dispose()
    n = r["n"]
    r["side"] = side
    r["per_task"] = {k: (after[k] - before[k]) / n for k in COUNTERS}
    r["connections_peak"] = peak[0]
    if side != "peer" and c <= START_LATENCY_MAX_C:
        log = env.dir / f"llm-docllm-c{c}.log"
        waits = claim_to_start_ms(log) if log.exists() else []
        if waits:
            r["claim_to_start_ms"] = {
                "p50": statistics.median(waits),
                "p95": statistics.quantiles(waits, n=20)[-1] if len(waits) > 1 else waits[0],
                "n": len(waits),
            }
    return r


def run(env: Env, results: dict) -> list[Table]:
    if env.mariadb is None:
        env.skip("store-load: needs MariaDB")
        return []
    o = env.options
    latency = 0.2 if env.quick else 1.0
    configs = [(16, 1)] if env.quick else [(1024, 1), (1024, 2), (256, 1), (64, 1)]
    if o.get("hp_c"):  # --c: only these concurrencies (the peer runs at the largest)
        configs = [(c, p) for c, p in configs if c in o["hp_c"]] or [(c, 1) for c in o["hp_c"]]
    repeats = o.get("hp_repeats") or 1
    before_src = o.get("before_src")
    sides = [("after", None), ("before", str(Path(before_src).resolve()))] if before_src else [("docllm", None)]
    runs = []
    with MockLLM(latency, env.dir / "store-load-mock.log") as mock:
        for rep in range(repeats):
            order = sides[rep % len(sides) :] + sides[: rep % len(sides)]
            for c, procs in configs:
                for side, src in order:
                    runs.append(_one(env, mock, c, procs, side, src, rep, latency))
            if not o.get("hp_c") or 1024 in o["hp_c"]:
                runs.append(_one(env, mock, configs[0][0], 1, "peer", None, rep, latency))
    results["store_load"] = {"runs": runs}
    t = Table(
        "store_load",
        "Issue 31: MariaDB's counters per task (SHOW GLOBAL STATUS deltas over the run)",
        [
            "repeat",
            "L s",
            "C",
            "processes",
            "worker",
            "tasks/s",
            "Com_commit/task",
            "Questions/task",
            "Threads_connected peak",
            "worker CPU ms/task",
            "mariadbd CPU ms/task",
            "claim-to-start p50 ms",
            "problems",
        ],
    )
    for r in runs:
        t.add(
            r["repeat"],
            r["latency"],
            r["concurrency"],
            r["processes"],
            "Dramatiq, two writes" if r["side"] == "peer" else f"docllm {r['side']}",
            r.get("per_s"),
            r["per_task"]["Com_commit"],
            r["per_task"]["Questions"],
            r["connections_peak"],
            r.get("cpu_ms_per_task"),
            r["server_cpu_ms_per_task"].get("mariadbd"),
            (r.get("claim_to_start_ms") or {}).get("p50"),
            "; ".join(r.get("problems") or []) or None,
        )
    return [t]


def _one(env: Env, mock: MockLLM, c: int, procs: int, side: str, src: str | None, rep: int, latency: float) -> dict:
    r = measured(env, mock, c, procs, side, src)
    r.update(latency=latency, repeat=rep + 1)
    start = r.get("claim_to_start_ms")
    print(
        f"   rep {rep + 1} C={c} p={procs} {side}: {r.get('per_s') or 0:.0f}/s, "
        f"commits {r['per_task']['Com_commit']:.3f}, questions {r['per_task']['Questions']:.2f}, "
        f"peak {r['connections_peak']}, mariadbd {r['server_cpu_ms_per_task'].get('mariadbd', 0):.3f} ms/task"
        + (f", claim-to-start p50 {start['p50']:.1f} ms" if start else ""),
        flush=True,
    )
    return r
