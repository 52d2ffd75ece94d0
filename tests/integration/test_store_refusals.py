"""The store's refusals of what a write holds, on real SQLite and MariaDB (issue 44): a value no
UTF-8 column takes and a report over the server's packet are ``Unstorable`` (not an outage) and
change nothing; a group over the packet goes as several statements in its one transaction; a
report refused alone fails its attempt with a readable error and charges nothing else."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.repository.store import MAX_PACKET
from docllm.domain.errors import Unstorable
from docllm.domain.tasks import attempts
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, FencedWrite, Task, TaskStatus, WriteKind
from docllm.domain.tasks.outcome import Outcome
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.runtime.grouper import Failed, send_bisected
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue

PACKET = 1024 * 1024


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def engine(request: pytest.FixtureRequest, tmp_path) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield engine
    engine.dispose()


def with_packet(engine: Engine, size: int) -> list[str]:
    """Every new connection of ``engine`` reports ``size`` as its max_allowed_packet (as MariaDB's do,
    read by the engine: ``engine._read_packet_limit``); the commits' UPDATEs, as they go. The
    e2e tests (``tests/e2e/test_one_bad_item.py``) hold the bound to a real server's packet."""
    engine.dispose()
    updates: list[str] = []

    @event.listens_for(engine, "connect")
    def _packet(dbapi_connection, record):
        record.info[MAX_PACKET] = size

    @event.listens_for(engine, "before_cursor_execute")
    def _seen(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("UPDATE") and "result=" in statement:
            updates.append(statement)

    return updates


def started(repo: SqlAlchemyTaskRepository, n: int) -> list[int]:
    ids = []
    for i in range(n):
        task = repo.create(f"d{i}.md", "# T\n")
        repo.start_attempt(task.task_id, f"tok{i}")
        ids.append(task.task_id)
    return ids


def row(repo: SqlAlchemyTaskRepository, task_id: int) -> Task:
    found = repo.get(task_id)
    assert found is not None
    return found


def commit(task_id: int, result: dict) -> FencedWrite:
    return FencedWrite(WriteKind.commit, task_id, 1, result=result)


def test_a_lone_surrogate_is_unstorable_and_its_group_changes_nothing(engine: Engine):
    repo = SqlAlchemyTaskRepository(engine)
    ids = started(repo, 3)
    writes = [commit(i, {"summary": "ok"}) for i in ids[:2]] + [commit(ids[2], {"summary": "bad \ud800"})]
    with pytest.raises(Unstorable, match="no UTF-8 column stores"):
        repo.write_group(writes)
    assert {row(repo, i).status for i in ids} == {TaskStatus.processing}  # one transaction: none landed
    answers = send_bisected(lambda group: repo.write_group(group).written, writes)
    assert answers[:2] == [True, True] and isinstance(answers[2], Failed)
    assert [row(repo, i).status for i in ids] == [TaskStatus.success, TaskStatus.success, TaskStatus.processing]


def test_a_group_over_the_packet_goes_as_several_statements_in_one_transaction(engine: Engine):
    updates = with_packet(engine, PACKET)
    repo = SqlAlchemyTaskRepository(engine)
    ids = started(repo, 8)
    big = 'a "quoted" word; ' * (300_000 // 17)  # 300 KB, each quote escaped on the wire
    outcome = repo.write_group([commit(i, {"summary": big}) for i in ids])
    assert outcome.written == [True] * 8
    assert all(row(repo, i).result == {"summary": big} for i in ids)
    assert len(updates) >= 3  # 2.4 MB (more, escaped) under a 1 MB packet: at least three statements


def test_a_report_over_the_packet_alone_is_refused_before_anything_is_sent(engine: Engine):
    updates = with_packet(engine, PACKET)
    repo = SqlAlchemyTaskRepository(engine)
    ids = started(repo, 2)
    with pytest.raises(Unstorable, match="max_allowed_packet"):
        repo.write_group([commit(ids[0], {"summary": "small"}), commit(ids[1], {"summary": "x" * PACKET})])
    assert updates == []
    assert {row(repo, i).status for i in ids} == {TaskStatus.processing}


def test_a_report_refused_alone_fails_its_attempt_with_a_readable_error(engine: Engine, monkeypatch):
    """The report's lone surrogate kept (the replacement broken on purpose): the store refuses it,
    the group is halved, and only its attempt fails, at once, with the reason."""
    monkeypatch.setattr(attempts, "storable_report", lambda report: report)
    clock = ManualClock()
    tokens = itertools.count(1)
    queue = InMemoryTaskQueue(clock, token_factory=lambda: f"t{next(tokens)}")
    repo = SqlAlchemyTaskRepository(engine)
    lease = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)
    proc = TaskProcessor(queue, repo, None, clock, RetryPolicy(max_attempts=3), lease, "w1")  # type: ignore[arg-type]
    for i in range(6):
        submit(repo, queue, f"d{i}.md", "# T\n\ntext\n")
    begun = [a for a in proc.begin_batch(proc.claim_batch(10)) if isinstance(a, Attempt)]
    ends: list[tuple[Attempt, Outcome]] = [
        (a, Outcome.success({"summary": "bad \ud800" if n == 4 else "ok"})) for n, a in enumerate(begun)
    ]
    landed = send_bisected(proc.commit_many, ends)
    assert landed == [True] * 6  # each attempt's end was written: five commits and one failure
    rows = [row(repo, a.task_id) for a, _ in ends]
    assert [r.status for r in rows] == [TaskStatus.success] * 4 + [TaskStatus.failed, TaskStatus.success]
    assert (rows[4].error or "").startswith("the report cannot be stored: it holds a character no UTF-8 column stores")
    assert [(r.attempt, r.retry_count) for r in rows] == [(1, 0)] * 4 + [(1, 1), (1, 0)]
    assert len(queue.dead_letters()) == 1 and queue.in_flight(100) == []  # acked, and dead-lettered


class Settles:
    """A spend ledger that only records what is settled (nothing reserved here)."""

    reserves = False

    def __init__(self) -> None:
        self.items: list = []

    def settle(self, items):
        self.items.extend(items)


def test_a_refused_reports_attempt_settles_its_spend_hold_like_any_other_end(engine: Engine, monkeypatch):
    """The merge with the spend ledger (issue 43): the attempt failed for its report releases the
    hold its review took, as every end does."""
    monkeypatch.setattr(attempts, "storable_report", lambda report: report)
    clock = ManualClock()
    queue = InMemoryTaskQueue(clock, token_factory=lambda: "t1")
    repo = SqlAlchemyTaskRepository(engine)
    lease = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)
    ledger = Settles()
    proc = TaskProcessor(queue, repo, None, clock, RetryPolicy(), lease, "w1", ledger=ledger)  # type: ignore[arg-type]
    submit(repo, queue, "d.md", "# T\n")
    [attempt] = [a for a in proc.begin_batch(proc.claim_batch(1)) if isinstance(a, Attempt)]
    attempt.hold, attempt.hold_release = "hold-1", True
    assert proc.commit_many([(attempt, Outcome.success({"summary": "bad \ud800"}))]) == [True]
    assert row(repo, attempt.task_id).status is TaskStatus.failed
    assert [(i.key, i.release) for i in ledger.items] == [("hold-1", True)] and attempt.hold is None
