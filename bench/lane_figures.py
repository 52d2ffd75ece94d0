"""The cost of ``lane_figures`` (docllm stats, the dashboard, the lane gauges) on a big table.

A table of ``ENDED`` rows that ended a day ago (outside the window), the issue's backlog (10,000
``bulk`` rows of tenant A, 100 ``interactive`` of B, 1,000 ``default`` of C; a tenth of them
running), 1,000 rows ended within the window; then the same with 10,000 more tenants holding
one pending row each. One read is ``lane_figures(3600, 10)``, median of ``RUNS``; beside it
``counts()``, the per-status count ``docllm stats`` already makes.

    PYTHONPATH=src:. python -m bench.lane_figures [--quick]
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from bench.common import Env
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.schema import task_doc_llm

RUNS = 5
BATCH = 5_000
BACKLOG = (("bulk", "A", 10_000), ("interactive", "B", 100), ("default", "C", 1_000))


def rows_of(n: int, **values) -> list[dict]:
    return [{"task_name": "doc", **values} for _ in range(n)]


def fill(engine, ended: int) -> None:
    now = datetime.now(UTC)
    long_ago = now - timedelta(days=1)
    old = {"status": "success", "attempt": 1, "created_at": long_ago, "updated_at": long_ago}
    old["processing_started_at"] = long_ago
    groups = [rows_of(ended, **old)]
    for lane, tenant, n in BACKLOG:
        groups.append(rows_of(n - n // 10, status="pending", priority=lane, tenant=tenant))
        started = now - timedelta(seconds=30)
        groups.append(
            rows_of(
                n // 10,
                status="processing",
                priority=lane,
                tenant=tenant,
                attempt=1,
                processing_started_at=started,
                created_at=started - timedelta(seconds=5),
            )
        )
    groups.append(
        rows_of(
            1_000,
            status="success",
            priority="default",
            tenant="C",
            attempt=1,
            processing_started_at=now,
            created_at=now - timedelta(seconds=2),
        )
    )
    insert_all(engine, [r for g in groups for r in g])


def insert_all(engine, rows: list[dict]) -> None:
    for i in range(0, len(rows), BATCH):
        with engine.begin() as conn:
            conn.execute(insert(task_doc_llm), rows[i : i + BATCH])


def median_ms(read) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(url: str, backend: str, ended: int) -> None:
    engine = make_engine(url)
    upgrade_schema(engine)
    fill(engine, ended)
    repo = SqlAlchemyTaskRepository(engine)
    for label in ("3 tenants with work", "10,003 tenants with work"):
        if label.startswith("10,003"):
            insert_all(engine, [{"task_name": "doc", "status": "pending", "tenant": f"t{i}"} for i in range(10_000)])
        figures = repo.lane_figures(3600, 10)
        assert figures.lanes[2].depth == 9_000 and figures.tenants[0].name == "A"
        lane_ms, counts_ms = median_ms(lambda: repo.lane_figures(3600, 10)), median_ms(repo.counts)
        print(f"| {backend} | {ended:,} | {label} | {lane_ms:.1f} | {counts_ms:.1f} |", flush=True)
    engine.dispose()


def main() -> None:
    quick = "--quick" in sys.argv
    ended = 20_000 if quick else 200_000
    print("| store | rows ended long ago | tenants | lane_figures ms | counts() ms |")
    print("|---|---:|---|---:|---:|")
    with Env(quick) as env:
        for backend in ("sqlite", "mariadb"):
            if backend == "mariadb" and env.mariadb is None:
                continue
            measure(env.new_database(backend), backend, ended)


if __name__ == "__main__":
    main()
