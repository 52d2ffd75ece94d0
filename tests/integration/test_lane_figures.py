"""Lane and tenant figures from rows the database holds (SQLite, and MariaDB whose session time
zone is +08:00): waits measured between the row's own UTC timestamps, quantiles by bucket, the
window by ``updated_at``, and the query's shape (an index range, not a scan, on MariaDB)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, text

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.repository.lanes import grouped
from docllm.adapters.sql.schema import task_doc_llm


def now() -> datetime:
    """Read at each use: a module-level constant is as old as the collection, and a busy CI run
    reached this file ten minutes after collecting it."""
    return datetime.now(UTC)


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def engine(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield engine
    engine.dispose()


def rows(engine, *values: dict) -> None:
    at = now()
    base = {"task_name": "doc", "status": "success", "attempt": 1, "created_at": at, "updated_at": at}
    with engine.begin() as conn:
        conn.execute(insert(task_doc_llm), [base | v for v in values])


def waited(seconds: float, **more) -> dict:
    at = now()
    return {"created_at": at - timedelta(seconds=seconds), "processing_started_at": at, **more}


def test_waits_are_start_minus_creation_in_buckets(engine):
    # interactive: 19 quick starts and one slow one; bulk: every wait long, one still running
    rows(
        engine,
        *(waited(0.4, priority="interactive", tenant="B") for _ in range(19)),
        waited(45, priority="interactive", tenant="B"),
        *(waited(3000, priority="bulk", tenant="A") for _ in range(4)),
        waited(3000, priority="bulk", tenant="A", status="processing"),
        waited(9000, priority="bulk", tenant="A", attempt=2),  # retried: its first start is gone
    )
    figures = SqlAlchemyTaskRepository(engine).lane_figures(3600, 5)
    lane = {g.name: g for g in figures.lanes}
    assert (lane["interactive"].wait_quantile(0.5), lane["interactive"].wait_quantile(0.95)) == (0.5, 0.5)
    assert lane["interactive"].wait_quantile(1.0) == 60  # the slow one: 45 s falls in (30, 60]
    assert (lane["bulk"].wait_samples, lane["bulk"].wait_quantile(0.5)) == (5, 3600)
    assert (lane["bulk"].finished, lane["bulk"].in_flight) == (5, 1)
    tenant = {g.name: g for g in figures.tenants}
    # B's work all ended within the window: it is ranked still, with its waits and done count
    # (issue 44: it used to disappear, and its figures with it), after A, which has work in flight.
    assert list(tenant) == ["A", "B"]
    assert tenant["A"].wait_quantile(0.95) == 3600
    assert (tenant["B"].finished, tenant["B"].wait_quantile(0.5), tenant["B"].wait_quantile(0.95)) == (20, 0.5, 0.5)
    assert figures.per_minute(tenant["B"]) == round(20 / 60, 3) and figures.others is None


def test_oldest_pending_age_is_utc_whatever_the_session_zone(engine):
    rows(engine, {"status": "pending", "priority": "bulk", "created_at": now() - timedelta(minutes=2), "attempt": 0})
    (bulk,) = [g for g in SqlAlchemyTaskRepository(engine).lane_figures(60, 1).lanes if g.name == "bulk"]
    assert 110 < bulk.oldest_pending_s < 400  # an 8 h offset would show as 28,800 s or less than 0
    assert bulk.depth == 1 and bulk.wait_samples == 0


@pytest.mark.mariadb
def test_the_lane_query_reads_index_ranges_not_the_table(mysql_url):
    engine = make_engine(mysql_url)
    upgrade_schema(engine)
    # most rows ended long ago, as in production: only the pending one and the recent ends are read
    ended = now() - timedelta(days=1)
    rows(engine, *({"status": "success", "updated_at": ended} for _ in range(2000)), {"status": "pending"})
    rows(engine, *({"status": "failed"} for _ in range(5)))
    with engine.begin() as conn:
        conn.execute(text("ANALYZE TABLE task_doc_llm"))
        sql = str(grouped(task_doc_llm.c.priority, 60).compile(conn, compile_kwargs={"literal_binds": True}))
        plan = conn.execute(text("EXPLAIN " + sql.replace("%%", "%"))).mappings().all()
    engine.dispose()
    assert [p["type"] for p in plan] == ["range"], plan
    assert plan[0]["key"] == "ix_task_doc_llm_status_updated_at"
