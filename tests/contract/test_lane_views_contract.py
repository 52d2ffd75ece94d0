"""One contract for every LaneViews: in memory, SQLite and a real MariaDB (the fixtures of the
TaskRepository contract). Waits longer than a write's tick are set by hand in
tests/integration/test_lane_figures.py, where the rows are the database's."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from docllm.adapters.sql.schema import task_doc_llm
from docllm.domain.lanes.figures import LANES, MAX_TOP_TENANTS, OTHERS, GroupFigures
from docllm.domain.tasks.model import Task
from tests.contract import test_task_repository_contract as repository_contract
from tests.support.memory.repository import InMemoryTaskRepository

HOUR_MS = 3_600_000
make_repo, repo = repository_contract.make_repo, repository_contract.repo  # its fixtures: the same stores


def placed(repo, name: str, priority: str | None, tenant: str | None) -> Task:
    """A pending row in a lane and of a tenant, as a producer of issue 26 writes it."""
    task = repo.create(name, "body")
    if isinstance(repo, InMemoryTaskRepository):
        with repo._lock:
            repo._rows[task.task_id] = replace(repo._rows[task.task_id], priority=priority, tenant=tenant)
    else:
        stmt = update(task_doc_llm).where(task_doc_llm.c.task_id == task.task_id)
        with repo._engine.begin() as conn:
            conn.execute(stmt.values(priority=priority, tenant=tenant))
    return task


def by_name(groups: tuple[GroupFigures, ...]) -> dict:
    return {g.name: (g.depth, g.in_flight, g.finished, g.wait_samples) for g in groups}


def test_an_empty_store_shows_every_lane_and_no_tenant(repo):
    figures = repo.lane_figures(3600, 10)
    assert [g.name for g in figures.lanes] == list(LANES)
    assert by_name(figures.lanes) == {lane: (0, 0, 0, 0) for lane in LANES}
    assert (figures.tenants, figures.tenants_with_work) == ((), 0)


def test_depth_in_flight_finished_and_waits_per_lane_and_tenant(repo):
    old = placed(repo, "old", None, None)  # an existing producer's row: lane default, no tenant
    bulk = [placed(repo, f"b{i}", "bulk", "A") for i in range(3)]
    quick = placed(repo, "q", "interactive", "B")
    retried = placed(repo, "r", "interactive", "B")
    for task in (bulk[0], quick, retried, old):
        repo.start_attempt(task.task_id, f"tok-{task.task_id}")
    repo.commit(quick.task_id, 1, {"findings": []})
    repo.retry(retried.task_id, 1, "flaky")
    repo.start_attempt(retried.task_id, "tok-again")  # attempt 2: its first start is gone, not sampled
    repo.fail(old.task_id, 1, "bad")

    figures = repo.lane_figures(3600, 10)
    assert by_name(figures.lanes) == {"interactive": (0, 1, 1, 1), "default": (0, 0, 1, 1), "bulk": (2, 1, 0, 1)}
    # The rows without a tenant have no work left but ended in the window: ranked with what they did
    # (issue 44: a tenant whose work all ended used to vanish from the figures).
    assert by_name(figures.tenants) == {"A": (2, 1, 0, 1), "B": (0, 1, 1, 1), None: (0, 0, 1, 1)}
    assert [g.name for g in figures.tenants] == ["A", "B", None] and figures.tenants_with_work == 2
    lane = {g.name: g for g in figures.lanes}
    assert lane["bulk"].wait_quantile(0.95) is not None and lane["bulk"].oldest_pending_s is not None
    assert lane["interactive"].oldest_pending_s is None  # nothing pending


def test_ended_rows_leave_the_figures_after_the_window(repo):
    task = placed(repo, "t", "bulk", "A")
    repo.start_attempt(task.task_id, "tok")
    repo.commit(task.task_id, 1, {"findings": []})
    if isinstance(repo, InMemoryTaskRepository):  # its clock ticks 1 ms per write: an hour on
        repo._ticks = itertools.count(HOUR_MS)
    else:
        with repo._engine.begin() as conn:  # the row ended an hour ago
            conn.execute(update(task_doc_llm).values(updated_at=datetime.now(UTC) - timedelta(hours=1)))
    assert {g.name: g.finished for g in repo.lane_figures(30, 10).lanes}["bulk"] == 0
    assert {g.name: g.finished for g in repo.lane_figures(36000, 10).lanes}["bulk"] == 1


def test_tenants_are_the_top_n_by_depth_then_in_flight(repo):
    for tenant, pending in (("A", 3), ("B", 1), ("C", 2), ("D", 1)):
        tasks = [placed(repo, f"{tenant}{i}", "default", tenant) for i in range(pending)]
    repo.start_attempt(tasks[0].task_id, "tok")  # D: none pending, one in flight
    placed(repo, "n1", None, None)
    placed(repo, "n2", None, None)
    figures = repo.lane_figures(3600, 3)
    assert [g.name for g in figures.tenants] == ["A", None, "C"]  # ties: no tenant before names
    assert figures.tenants_with_work == 4  # named tenants with work, shown or not
    others = figures.others  # every tenant beyond the top N as one, "(other)" (issue 44): B and D
    assert others is not None and (others.name, others.depth, others.in_flight) == (OTHERS, 1, 1)
    assert [g.name for g in repo.lane_figures(3600, 10).tenants] == ["A", None, "C", "B", "D"]
    assert repo.lane_figures(3600, 10).others is None
    assert repo.lane_figures(3600, 0).tenants == ()
    everyone = repo.lane_figures(3600, 0).others
    assert everyone is not None and (everyone.depth, everyone.in_flight) == (8, 1)
    with pytest.raises(ValueError, match="top tenants"):
        repo.lane_figures(3600, MAX_TOP_TENANTS + 1)
