"""The in-memory LaneViews is a Python copy of the SQL reads (which rows count as what, which
tenants rank first): on generated tables both give the same figures (SQLite here; the contract
tests run MariaDB on fixed cases).

Times are chosen away from every edge (the window's, the buckets'), so the few milliseconds
between the two stores' "now" cannot decide anything; the oldest pending age is compared within
a margin for the same reason.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.schema import task_doc_llm
from docllm.domain.lanes.figures import WAIT_BUCKETS
from docllm.domain.tasks.model import Task, TaskStatus
from sim.manual_clock import ManualClock
from tests.support.memory.repository import InMemoryTaskRepository

WINDOW_S = 3600
# waits in the middle of a bucket (and one beyond the last bound)
WAITS = [(low + high) / 2 for low, high in zip((0, *WAIT_BUCKETS), WAIT_BUCKETS, strict=False)] + [2 * 86400]

row = st.fixed_dictionaries(
    {
        "status": st.sampled_from(list(TaskStatus)),
        "priority": st.sampled_from([None, "interactive", "default", "bulk", "other"]),
        "tenant": st.sampled_from([None, "a", "b", "c", "d", "e"]),
        "attempt": st.integers(0, 3),
        "wait_s": st.sampled_from(WAITS),
        "started": st.booleans(),
        "ended_ago_s": st.sampled_from([5, 600, 2 * WINDOW_S]),  # within the window or well outside
    }
)


def rows_at(now: datetime, specs: list[dict]) -> list[dict]:
    out = []
    for i, s in enumerate(specs):
        ended = now - timedelta(seconds=s["ended_ago_s"])
        started = ended if s["started"] and s["status"] is not TaskStatus.pending else None
        created = (started or ended) - timedelta(seconds=s["wait_s"])
        out.append(
            {
                "task_id": i + 1,
                "task_name": f"t{i}",
                "status": s["status"].value,
                "priority": s["priority"],
                "tenant": s["tenant"],
                "attempt": s["attempt"],
                "created_at": created,
                "updated_at": ended,
                "processing_started_at": started,
            }
        )
    return out


def comparable(figures):
    def strip(groups):
        return [(replace(g, oldest_pending_s=None), g.oldest_pending_s) for g in groups]

    tenants = strip(figures.tenants) + strip([figures.others] if figures.others is not None else [])
    return figures.window_s, strip(figures.lanes), tenants, figures.tenants_with_work


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(row, max_size=40), top=st.integers(0, 4))
def test_memory_and_sql_agree(tmp_path, specs, top):
    engine = make_engine(f"sqlite:///{tmp_path / 'lanes.db'}")
    upgrade_schema(engine)
    now = datetime.now(UTC)
    rows = rows_at(now, specs)
    with engine.begin() as conn:
        conn.execute(delete(task_doc_llm))
        if rows:
            conn.execute(insert(task_doc_llm), rows)
    sql = SqlAlchemyTaskRepository(engine).lane_figures(WINDOW_S, top)
    engine.dispose()

    memory = InMemoryTaskRepository(ManualClock(int(now.timestamp() * 1000)))
    for r in rows:
        memory._rows[r["task_id"]] = Task(**(r | {"status": TaskStatus(r["status"])}))
    mem = memory.lane_figures(WINDOW_S, top)

    (w1, lanes1, tenants1, n1), (w2, lanes2, tenants2, n2) = comparable(sql), comparable(mem)
    assert (w1, n1) == (w2, n2)
    for ours, theirs in ((lanes1, lanes2), (tenants1, tenants2)):
        assert [g for g, _ in ours] == [g for g, _ in theirs]
        for (_, a), (_, b) in zip(ours, theirs, strict=True):
            assert (a is None) == (b is None) and (a is None or abs(a - b) < 5.0)
