"""Review (issue 44, one bad item fails alone): a group refused for a reason that is nobody's
report -- the database is FULL (SQLite "database or disk is full", MariaDB 1114 "The table is full",
1021 "Disk full") -- is halved down to single commits, and each lone commit's refusal is read as
"the report cannot be stored": every task in flight fails permanently, with the reports in hand.
A full disk is an outage of the store, not the document's fault. Real SQLite, its file capped with
``PRAGMA max_page_count`` (what a full disk does to it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, TaskStatus
from docllm.domain.tasks.outcome import Outcome
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.runtime.grouper import send_bisected
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue


@pytest.fixture
def engine(tmp_path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'tasks.db'}")
    upgrade_schema(engine)
    yield engine
    engine.dispose()


def disk_full(engine: Engine) -> None:
    """From now on the database file cannot grow: every connection capped at its current size."""
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    engine.dispose()

    @event.listens_for(engine, "connect")
    def _cap(dbapi_connection, record):
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_does_not_fail_every_task_in_flight_as_unstorable(engine: Engine):
    clock = ManualClock()
    tokens = itertools.count(1)
    queue = InMemoryTaskQueue(clock, token_factory=lambda: f"t{next(tokens)}")
    repo = SqlAlchemyTaskRepository(engine)
    lease = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)
    proc = TaskProcessor(queue, repo, None, clock, RetryPolicy(max_attempts=3), lease, "w1")  # type: ignore[arg-type]
    for i in range(6):
        submit(repo, queue, f"d{i}.md", "# T\n\ntext\n")
    begun = [a for a in proc.begin_batch(proc.claim_batch(10)) if isinstance(a, Attempt)]
    disk_full(engine)
    big = "finding text " * 4000  # ~50 KB a report: each needs new pages the full file cannot give
    ends = [(a, Outcome.success({"summary": big})) for a in begun]
    send_bisected(proc.commit_many, ends)
    rows = [repo.get(a.task_id) for a, _ in ends]
    # Nobody's report is to blame: none is failed for what it holds (each stays to be retried, handed
    # back or settled by the reaper once the disk has room, as in an outage).
    failed = [(r.status, r.error) for r in rows if r is not None and r.status is TaskStatus.failed]
    assert failed == [], failed
