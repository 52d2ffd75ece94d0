"""Scenarios of issue 44 on virtual time: the real Worker (its loop grouper, commit_many, retries)
over the production Lua on fakeredis and the real SQL store on a SQLite file, whose connections
play MariaDB's packet limit (the limit read at connect; a statement over it drops the connection,
error 2006, as MariaDB does). The answers of eight attempts end together, so their commits go as
groups; each scenario turns red when the mechanism it is about is broken on purpose (the
``break_*`` tests).

- unstorable: one report holds a lone surrogate; every task commits once, that one replaced.
- refused: one report is over the packet; it fails alone, at once, with its reason; the others
  of its group commit once, none charged.
- oversized: eight reports each under the packet, together over it; all commit once, none charged.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.repository import store as sql_store
from docllm.domain.tasks import attempts
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.storable import REPLACED_KEY
from docllm.runtime import grouper
from tests.support.runtime_rig import Rig, run

PACKET = 1024 * 1024
TASKS = 8


class Answers:
    """A reviewer whose answers all take the same time; ``shape`` says what a task's report holds."""

    name = "sim"

    def __init__(self, shape: dict[str, str]):
        self.shape = shape

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        # d0 first: its commit goes alone at once (nothing in flight), and the seven that end
        # together while it is written form one group.
        await asyncio.sleep(0.04 if task_name == "d0.md" else 0.05)
        summary = f"review of {task_name}"
        kind = self.shape.get(task_name)
        if kind == "surrogate":
            summary += " \ud800"
        elif kind is not None:
            summary += " " + "x" * int(kind)
        return {"findings": [], "summary": summary, "reviewer": "offline"}

    async def check(self) -> None:
        pass


class Groups(SqlAlchemyTaskRepository):
    """The SQL store, noting the tasks of the commits of each group it is sent."""

    commits: list[set[int]]
    dropped: list[int]  # statements the database dropped for their size (packet_limited)

    def write_group(self, writes, starts=()):
        self.commits.append({w.task_id for w in writes if w.kind.value == "commit"})
        return super().write_group(writes, starts)


def packet_limited(engine: Any) -> list[int]:
    """MariaDB's packet on SQLite: each connection reports PACKET, and a statement over it fails
    as MariaDB's does (the server drops the connection: 2006, read as an outage). The sizes of the
    statements dropped: a healthy database must never see one."""
    dropped: list[int] = []

    @event.listens_for(engine, "connect")
    def _limit(dbapi_connection, record):
        record.info[sql_store.MAX_PACKET] = PACKET

    @event.listens_for(engine, "before_cursor_execute")
    def _drop(conn, cursor, statement, parameters, context, executemany):
        values = parameters.values() if isinstance(parameters, dict) else parameters or ()
        size = len(statement) + sum(len(v.encode("utf-8", "surrogatepass")) for v in values if isinstance(v, str))
        if size > PACKET:
            dropped.append(size)
            raise sqlite3.OperationalError(2006, "MySQL server has gone away (a packet over max_allowed_packet)")

    return dropped


@pytest.fixture
def store(tmp_path) -> Iterator[Groups]:
    engine = make_engine(f"sqlite:///{tmp_path / 'sim.db'}")
    dropped = packet_limited(engine)  # before the first connection: each reads its limit when it connects
    upgrade_schema(engine)
    repo = Groups(engine)
    repo.commits, repo.dropped = [], dropped
    yield repo
    engine.dispose()


def scenario(store: Groups, shape: dict[int, str], within_s: float = 20.0) -> dict[int, Any]:
    """TASKS tasks (``d{i}.md``), ``shape`` of the i-th task's report; run until each ends or
    ``within_s`` of virtual time; the rows."""
    rig = Rig(Answers({f"d{i}.md": kind for i, kind in shape.items()}), lease=5.0, concurrency=TASKS)
    rig.repo = rig.proc.repo = store  # type: ignore[assignment]
    ids = [store.create(f"d{i}.md", "# T\n\ntext\n").task_id for i in range(TASKS)]
    for task_id in ids:
        rig.queue.push(f'{{"task_id": {task_id}, "task_name": "d{task_id - ids[0]}.md"}}')

    async def until_ended(rig: Rig) -> None:
        def ended() -> bool:
            counts = store.counts()  # grouped: no report read at each look
            return counts.get("success", 0) + counts.get("failed", 0) == TASKS

        await rig.reaping()(ended, timeout=within_s)

    run(rig, until_ended)
    shaped = {ids[i] for i in shape}
    assert any(len(group) > 1 and group & shaped for group in store.commits), "no shaped report in a group"
    # The database was up all along: no statement was sent that it had to drop (an "outage" of our
    # own making; the jittered retries of the writes would end it, but the leases meanwhile ran).
    assert store.dropped == [], f"statements over the packet sent: {store.dropped}"
    return {i: store.get(task_id) for i, task_id in enumerate(ids)}


def once_each(rows: dict[int, Any], which: set[int]) -> None:
    assert {i: (rows[i].attempt, rows[i].retry_count, rows[i].handbacks) for i in which} == dict.fromkeys(
        which, (1, 0, 0)
    )


def test_unstorable_a_lone_surrogate_is_stored_replaced_and_its_group_commits_once(store):
    rows = scenario(store, {3: "surrogate"})
    assert {r.status for r in rows.values()} == {TaskStatus.success}
    assert rows[3].result[REPLACED_KEY] == 1 and "\ufffd" in rows[3].result["summary"]
    once_each(rows, set(rows))


def test_refused_a_report_over_the_packet_fails_alone_and_its_group_commits_once(store):
    rows = scenario(store, {3: str(PACKET + 1000)})
    assert rows[3].status is TaskStatus.failed and rows[3].error.startswith("the report cannot be stored: ")
    assert rows[3].attempt == 1  # failed at once: not reviewed again
    assert {r.status for i, r in rows.items() if i != 3} == {TaskStatus.success}
    once_each(rows, set(rows) - {3})


def test_oversized_reports_together_over_the_packet_all_commit_once(store):
    rows = scenario(store, dict.fromkeys(range(TASKS), str(PACKET // 3)))
    assert {r.status for r in rows.values()} == {TaskStatus.success}
    once_each(rows, set(rows))


# -- each mechanism broken on purpose turns its scenario red ----------------------------------------


def test_break_replacement_the_surrogate_scenario_goes_red(store, monkeypatch):
    monkeypatch.setattr(attempts, "storable_report", lambda report: report)
    with pytest.raises(AssertionError):
        test_unstorable_a_lone_surrogate_is_stored_replaced_and_its_group_commits_once(store)


def _fail_the_group(send, items):
    try:
        return list(send(items))
    except Exception as exc:  # noqa: BLE001 - the whole group hears of it, as before issue 44
        return [grouper.Failed(exc)] * len(items)


def test_break_halving_the_refused_scenario_goes_red(store, monkeypatch):
    monkeypatch.setattr(grouper, "send_bisected", _fail_the_group)
    with pytest.raises(AssertionError):
        test_refused_a_report_over_the_packet_fails_alone_and_its_group_commits_once(store)


def test_break_the_packet_bound_the_oversized_scenario_goes_red(store, monkeypatch):
    monkeypatch.setattr(sql_store, "statement_budget", lambda max_packet: None)
    with pytest.raises(AssertionError):
        test_oversized_reports_together_over_the_packet_all_commit_once(store)
