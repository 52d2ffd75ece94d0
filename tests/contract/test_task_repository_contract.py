"""One contract for every TaskRepository: in memory, SQLite (a file) and a real MariaDB.

The fencing cases are the point (ARCHITECTURE.md, Task lifecycle): a stale attempt can change nothing, a
duplicate start is recognised, and ``attempt`` only ever grows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC

import pytest

from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import StartResult, Task, TaskStatus
from docllm.domain.tasks.ports import TaskRepository
from tests.support.memory.repository import InMemoryTaskRepository

PENDING, PROCESSING, SUCCESS, FAILED = TaskStatus
MB = 1024 * 1024


@pytest.fixture(params=["memory", "sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def make_repo(request, tmp_path) -> Iterator[Callable[..., TaskRepository]]:
    """A factory of repositories over one fresh store: ``make_repo(default_max_attempts=3)``."""
    if request.param == "memory":
        yield lambda **kw: InMemoryTaskRepository(**kw)
        return
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.adapters.sql.repository import SqlAlchemyTaskRepository

    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield lambda **kw: SqlAlchemyTaskRepository(engine, **kw)
    engine.dispose()


@pytest.fixture
def repo(make_repo) -> TaskRepository:
    return make_repo()


def started(repo: TaskRepository, token: str = "tok-1", name: str = "doc") -> Task:
    task = repo.create(name, "body")
    outcome = repo.start_attempt(task.task_id, token)
    assert outcome.result is StartResult.started and outcome.task is not None
    return outcome.task


# -- create and reads ---------------------------------------------------------------------------


def test_create_gives_a_pending_row_with_utc_timestamps(repo):
    task = repo.create("report.docx", "文档内容", max_attempts=3)
    assert (task.task_name, task.document, task.status) == ("report.docx", "文档内容", PENDING)
    assert (task.attempt, task.retry_count, task.max_attempts, task.lease_token) == (0, 0, 3, None)
    assert task.result is None and task.error is None
    assert task.processing_started_at is None and task.finished_at is None
    assert task.created_at.tzinfo is not None and task.created_at.utcoffset() == UTC.utcoffset(None)
    assert task.updated_at == task.created_at
    assert repo.get(task.task_id) == task


def test_create_takes_the_default_budget(make_repo):
    repo = make_repo(default_max_attempts=4)
    assert repo.create("a", "x").max_attempts == 4
    assert repo.create("b", "x", max_attempts=2).max_attempts == 2


def test_get_of_a_missing_task_is_none(repo):
    assert repo.get(424242) is None


def test_get_many_lists_known_tasks_by_id_without_documents(repo):
    a, b, c = (repo.create(n, "big body") for n in "abc")
    found = repo.get_many([c.task_id, a.task_id, 999999, a.task_id])
    assert [t.task_id for t in found] == [a.task_id, c.task_id]
    assert all(t.document is None for t in found)
    assert found[0].task_name == "a"
    assert repo.get_many([]) == []


def test_recent_is_newest_first_and_limited(repo):
    ids = [repo.create(f"t{i}", "x").task_id for i in range(5)]
    assert [t.task_id for t in repo.recent(3)] == ids[::-1][:3]
    assert [t.task_id for t in repo.recent()] == ids[::-1]


def test_counts_has_every_status(repo):
    assert repo.counts() == {"pending": 0, "processing": 0, "success": 0, "failed": 0}
    done = started(repo, name="done")
    repo.commit(done.task_id, done.attempt, {"ok": True})
    broken = started(repo, name="broken")
    repo.fail(broken.task_id, broken.attempt, "boom")
    started(repo, name="running")
    repo.create("waiting", "x")
    assert repo.counts() == {"pending": 1, "processing": 1, "success": 1, "failed": 1}


def test_a_ten_megabyte_document_round_trips(repo):
    document = ("检查这份文档。" * 10 + "\n") * (MB // 20) + "end"
    assert len(document.encode()) > 10 * MB
    task = repo.create("big", document)
    assert repo.get(task.task_id).document == document
    assert repo.start_attempt(task.task_id, "t").task.document == document


# -- start_attempt --------------------------------------------------------------------------------


def test_start_moves_pending_to_processing_under_the_token(repo):
    created = repo.create("doc", "body")
    outcome = repo.start_attempt(created.task_id, "tok-1")
    task = outcome.task
    assert outcome.result is StartResult.started
    assert (task.status, task.attempt, task.lease_token, task.document) == (PROCESSING, 1, "tok-1", "body")
    assert task.processing_started_at is not None and task.finished_at is None
    assert task.updated_at >= created.updated_at
    assert repo.get(task.task_id) == task


def test_start_of_a_missing_task(repo):
    outcome = repo.start_attempt(424242, "tok")
    assert outcome.result is StartResult.missing and outcome.task is None


@pytest.mark.parametrize("end", ["commit", "fail"])
def test_start_of_a_finished_task_is_terminal(repo, end):
    task = started(repo)
    if end == "commit":
        assert repo.commit(task.task_id, task.attempt, {"ok": True})
    else:
        assert repo.fail(task.task_id, task.attempt, "boom")
    outcome = repo.start_attempt(task.task_id, "tok-2")
    assert outcome.result is StartResult.terminal
    assert outcome.task.status == (SUCCESS if end == "commit" else FAILED)
    assert repo.get(task.task_id).attempt == 1


def test_start_under_another_token_is_busy(repo):
    task = started(repo, token="tok-1")
    outcome = repo.start_attempt(task.task_id, "tok-2")
    assert outcome.result is StartResult.busy
    assert (outcome.task.attempt, outcome.task.lease_token) == (1, "tok-1")


def test_start_again_with_the_same_token_is_the_same_attempt(repo):
    first = started(repo, token="tok-1")
    again = repo.start_attempt(first.task_id, "tok-1")
    assert again.result is StartResult.started
    assert (again.task.attempt, again.task.lease_token) == (1, "tok-1")


# -- fenced writes --------------------------------------------------------------------------------


def test_commit_stores_the_result_of_the_holding_attempt(repo):
    task = started(repo)
    report = {"verdict": "pass", "issues": [{"line": 3, "text": "错别字"}], "score": 0.5}
    assert repo.commit(task.task_id, task.attempt, report)
    done = repo.get(task.task_id)
    assert (done.status, done.result, done.error, done.attempt) == (SUCCESS, report, None, 1)
    assert done.finished_at is not None and done.updated_at >= task.updated_at
    assert not repo.commit(task.task_id, task.attempt, {"again": True})
    assert repo.get(task.task_id).result == report


def test_retry_puts_the_task_back_to_pending(repo):
    task = started(repo)
    assert repo.retry(task.task_id, task.attempt, "429 from the LLM")
    back = repo.get(task.task_id)
    assert (back.status, back.retry_count, back.error, back.attempt) == (PENDING, 1, "429 from the LLM", 1)
    assert back.lease_token is None and back.processing_started_at is None and back.finished_at is None
    assert not repo.retry(task.task_id, task.attempt, "again")
    assert repo.get(task.task_id).retry_count == 1


def test_retry_that_does_not_count_keeps_the_budget(repo):
    task = started(repo)
    assert repo.hand_back(task.task_id, task.attempt, "worker shutting down")
    assert repo.get(task.task_id).retry_count == 0


def test_fail_ends_the_task(repo):
    task = started(repo)
    assert repo.fail(task.task_id, task.attempt, "unsupported format")
    failed = repo.get(task.task_id)
    assert (failed.status, failed.retry_count, failed.error) == (FAILED, 1, "unsupported format")
    assert failed.finished_at is not None
    assert not repo.fail(task.task_id, task.attempt, "again")


def test_a_stale_attempt_can_change_nothing(repo):
    """D5: attempt 1 was reclaimed and attempt 2 runs; attempt 1's late writes all miss."""
    first = started(repo, token="tok-1")
    assert repo.hand_back(first.task_id, first.attempt, "lease expired")
    second = repo.start_attempt(first.task_id, "tok-2").task
    assert second.attempt == 2
    before = repo.get(first.task_id)
    assert not repo.commit(first.task_id, first.attempt, {"stale": True})
    assert not repo.retry(first.task_id, first.attempt, "stale")
    assert not repo.fail(first.task_id, first.attempt, "stale")
    assert repo.get(first.task_id) == before
    assert repo.commit(second.task_id, second.attempt, {"fresh": True})
    assert repo.get(first.task_id).result == {"fresh": True}


def test_fenced_writes_need_a_processing_row(repo):
    pending = repo.create("p", "x")
    assert not repo.commit(pending.task_id, 0, {})
    assert not repo.retry(pending.task_id, 0, "e")
    assert not repo.fail(pending.task_id, 0, "e")
    assert not repo.commit(424242, 1, {})
    assert not repo.retry(424242, 1, "e")
    assert not repo.fail(424242, 1, "e")
    assert repo.get(pending.task_id) == pending


def test_attempts_count_up_through_retries(repo):
    task = repo.create("flaky", "x")
    for n in range(1, 4):
        attempt = repo.start_attempt(task.task_id, f"tok-{n}").task
        assert attempt.attempt == n
        assert repo.retry(task.task_id, n, f"error {n}")
    assert repo.get(task.task_id).retry_count == 3


# -- reopen and delete ----------------------------------------------------------------------------


def test_reopen_gives_a_fresh_budget_and_keeps_the_fencing_token(repo):
    task = started(repo, token="tok-1")
    repo.retry(task.task_id, 1, "e1")
    repo.start_attempt(task.task_id, "tok-2")
    assert repo.fail(task.task_id, 2, "e2")
    assert repo.reopen(task.task_id)
    reopened = repo.get(task.task_id)
    assert (reopened.status, reopened.retry_count, reopened.attempt) == (PENDING, 0, 2)
    assert reopened.finished_at is None and reopened.lease_token is None
    assert not repo.commit(task.task_id, 2, {"stale": True})  # the failed attempt stays fenced off
    again = repo.start_attempt(task.task_id, "tok-3").task
    assert again.attempt == 3
    assert repo.commit(task.task_id, 3, {"ok": True})


def test_reopen_only_reopens_failed_tasks(repo):
    pending = repo.create("p", "x")
    running = started(repo)
    done = started(repo, token="tok-d")
    repo.commit(done.task_id, done.attempt, {})
    for task_id in (pending.task_id, running.task_id, done.task_id, 424242):
        assert not repo.reopen(task_id)
    assert repo.get(running.task_id).status == PROCESSING
    assert repo.get(done.task_id).status == SUCCESS


def test_delete(repo):
    task = repo.create("gone", "x")
    assert repo.delete(task.task_id)
    assert repo.get(task.task_id) is None
    assert not repo.delete(task.task_id)
    assert repo.start_attempt(task.task_id, "t").result is StartResult.missing


# -- non_terminal_after (the reconciler's paging) ------------------------------------------------


def page_through(repo: TaskRepository, limit: int) -> list[Task]:
    seen: list[Task] = []
    cursor = None
    while True:
        page = repo.non_terminal_after(cursor, limit)
        assert len(page) <= limit
        if not page:
            return seen
        seen += page
        cursor = (page[-1].updated_at, page[-1].task_id)


def test_non_terminal_after_pages_pending_and_processing_rows_in_order(repo):
    tasks = [repo.create(f"t{i}", "x") for i in range(7)]
    repo.start_attempt(tasks[1].task_id, "a")
    repo.start_attempt(tasks[2].task_id, "b")
    repo.commit(tasks[2].task_id, 1, {})
    repo.start_attempt(tasks[3].task_id, "c")
    repo.fail(tasks[3].task_id, 1, "e")
    repo.start_attempt(tasks[4].task_id, "d")
    expected = {tasks[i].task_id for i in (0, 1, 4, 5, 6)}

    for limit in (1, 2, 3, 100):
        seen = page_through(repo, limit)
        assert [t.task_id for t in seen if t.task_id in expected] == [t.task_id for t in seen]
        assert len(seen) == len(expected) and {t.task_id for t in seen} == expected
        keys = [(t.updated_at, t.task_id) for t in seen]
        assert keys == sorted(keys)
        assert all(t.document is None for t in seen)
        assert {t.status for t in seen} == {PENDING, PROCESSING}


def test_a_touched_row_moves_to_the_end_of_the_order(repo):
    first, second = repo.create("first", "x"), repo.create("second", "x")
    time.sleep(0.005)  # past SQLite's millisecond resolution
    repo.start_attempt(first.task_id, "tok")
    assert [t.task_id for t in repo.non_terminal_after(None, 10)] == [second.task_id, first.task_id]
    cursor = (second.updated_at, second.task_id)
    assert [t.task_id for t in repo.non_terminal_after(cursor, 10)] == [first.task_id]


def test_updated_at_never_goes_back(repo):
    task = repo.create("t", "x")
    stamps = [task.updated_at]
    attempt = repo.start_attempt(task.task_id, "a").task
    stamps.append(attempt.updated_at)
    repo.retry(task.task_id, attempt.attempt, "e")
    stamps.append(repo.get(task.task_id).updated_at)
    assert stamps == sorted(stamps)


# -- LLM usage (migration 0003) -------------------------------------------------------------------


def test_usage_is_empty_until_an_attempt_writes_some(repo):
    task = started(repo)
    assert task.usage is None
    assert repo.commit(task.task_id, task.attempt, {"ok": True}, usage=Usage())  # no calls: nothing recorded
    assert repo.get(task.task_id).usage is None
    assert repo.usage_totals() == (Usage(), Usage())


def test_usage_sums_over_the_attempts_that_write_an_outcome(repo):
    task = started(repo, token="tok-1")
    assert repo.retry(task.task_id, 1, "500", usage=Usage(2, 100, 0, 1.25, "gpt-4o-mini", None))
    assert repo.get(task.task_id).usage == Usage(2, 100, 0, 1.25, "gpt-4o-mini", None)
    repo.start_attempt(task.task_id, "tok-2")
    assert repo.hand_back(task.task_id, 2, "shutdown", usage=Usage(1, 50, 0, 0.5, "gpt-4o", 0.25))
    repo.start_attempt(task.task_id, "tok-3")
    assert repo.fail(task.task_id, 3, "400", usage=Usage(1, 7, 3, 0.25, "gpt-4o", 0.125))
    usage = repo.get(task.task_id).usage
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.model) == (4, 157, 3, "gpt-4o")
    assert usage.llm_seconds == pytest.approx(2.0) and usage.cost_usd == pytest.approx(0.375)
    assert repo.get_many([task.task_id])[0].usage == usage  # listings carry it too


def test_a_stale_attempt_adds_no_usage(repo):
    first = started(repo, token="tok-1")
    assert repo.hand_back(first.task_id, 1, "lease expired")
    second = repo.start_attempt(first.task_id, "tok-2").task
    spent = Usage(3, 30, 3, 3.0, "m", 0.3)
    assert not repo.commit(first.task_id, 1, {"stale": True}, usage=spent)
    assert not repo.retry(first.task_id, 1, "stale", usage=spent)
    assert not repo.fail(first.task_id, 1, "stale", usage=spent)
    assert repo.get(first.task_id).usage is None
    assert repo.commit(second.task_id, second.attempt, {"fresh": True}, usage=Usage(1, 10, 1, 1.0, "m", 0.1))
    assert repo.get(first.task_id).usage == Usage(1, 10, 1, 1.0, "m", 0.1)


def test_usage_totals_sum_every_row_and_the_recent_ones(repo):
    for n, cost in ((1, 0.5), (2, None), (3, 0.25)):
        task = started(repo, token=f"tok-{n}", name=f"doc-{n}")
        assert repo.commit(task.task_id, task.attempt, {}, usage=Usage(n, 10 * n, n, 0.5 * n, "m", cost))
    repo.create("never ran", "x")
    every, recent = repo.usage_totals(3600)
    assert (every.calls, every.prompt_tokens, every.completion_tokens, every.model) == (6, 60, 6, None)
    assert every.llm_seconds == pytest.approx(3.0) and every.cost_usd == pytest.approx(0.75)
    assert recent == every
    time.sleep(0.01)
    assert repo.usage_totals(0)[1].calls == 0  # nothing was written at or after now


def _end(repo: TaskRepository, task: Task, ok: bool) -> None:
    started = repo.start_attempt(task.task_id, f"tok-{task.task_id}").task
    assert started is not None
    if ok:
        assert repo.commit(task.task_id, started.attempt, {"findings": []})
    else:
        assert repo.fail(task.task_id, started.attempt, "boom")


def test_search_filters_by_status_and_name_newest_first(repo):
    a, b, c = (repo.create(name, "x") for name in ("guide.md", "Guide 100%_v2.md", "notes.txt"))
    _end(repo, b, ok=True)
    assert [t.task_id for t in repo.search()] == [c.task_id, b.task_id, a.task_id]
    assert [t.task_id for t in repo.search(name_contains="uide")] == [b.task_id, a.task_id]
    assert [t.task_id for t in repo.search(name_contains="GUIDE")] == [b.task_id, a.task_id]  # any case
    assert [t.task_id for t in repo.search(name_contains="100%_")] == [b.task_id]  # wildcards are text
    assert repo.search(name_contains="%") == repo.search(name_contains="100%")
    assert [t.task_id for t in repo.search(PENDING)] == [c.task_id, a.task_id]
    assert [t.task_id for t in repo.search(SUCCESS, "guide")] == [b.task_id]
    assert [t.task_id for t in repo.search(limit=1)] == [c.task_id]
    assert all(t.document is None for t in repo.search())


def test_finished_per_minute_counts_ended_tasks_of_the_last_minutes(repo):
    tasks = [repo.create(f"t{i}", "x") for i in range(4)]
    for task, ok in zip(tasks[:3], (True, True, False), strict=True):
        _end(repo, task, ok)
    counts = repo.finished_per_minute(5)
    assert set(counts) == {"success", "failed"} and all(len(v) == 5 for v in counts.values())
    # now, or the minute before when the clock turned a minute since
    assert (sum(counts["success"][-2:]), sum(counts["failed"][-2:])) == (2, 1)


# -- the operator's cancel ------------------------------------------------------------------------


def test_cancel_pending_fails_a_pending_row_fenced_on_its_attempt(repo):
    task = repo.create("doc", "body")
    assert not repo.cancel_pending(task.task_id, 1, "cancelled by operator")  # not the attempt read
    assert repo.cancel_pending(task.task_id, 0, "cancelled by operator")
    row = repo.get(task.task_id)
    assert (row.status, row.error, row.attempt) == (FAILED, "cancelled by operator", 0)
    assert row.finished_at is not None
    assert not repo.cancel_pending(task.task_id, 0, "cancelled by operator")  # terminal now
    assert not repo.cancel_pending(424242, 0, "cancelled by operator")


def test_cancel_pending_never_touches_a_row_an_attempt_runs(repo):
    task = started(repo)
    assert not repo.cancel_pending(task.task_id, task.attempt, "cancelled by operator")
    assert not repo.cancel_pending(task.task_id, task.attempt - 1, "cancelled by operator")
    assert repo.get(task.task_id).status is PROCESSING
    assert repo.retry(task.task_id, task.attempt, "llm 503")  # back to pending under attempt 1
    assert repo.cancel_pending(task.task_id, task.attempt, "cancelled by operator")
    assert repo.reopen(task.task_id)  # the operator's retry reopens a cancelled task
    assert repo.get(task.task_id).status is PENDING


# -- groups (write_group): one transaction, each row fenced on its own ----------------------------


def test_a_group_with_one_stale_attempt_commits_the_others_and_reports_that_one(repo):
    from docllm.domain.tasks.model import FencedWrite, WriteKind

    rows = [started(repo, token=f"tok-{i}", name=f"doc-{i}") for i in range(4)]
    stale = rows[1]
    assert repo.hand_back(stale.task_id, stale.attempt, "lease lost")  # the reaper settled it
    usage = Usage(calls=2, prompt_tokens=10, completion_tokens=5, llm_seconds=0.5, model="m")
    writes = [
        FencedWrite(WriteKind.commit, rows[0].task_id, rows[0].attempt, result={"n": 0}, usage=usage),
        FencedWrite(WriteKind.commit, stale.task_id, stale.attempt, result={"n": 1}, usage=usage),
        FencedWrite(WriteKind.retry, rows[2].task_id, rows[2].attempt, error="try again"),
        FencedWrite(WriteKind.fail, rows[3].task_id, rows[3].attempt, error="bad", usage=usage),
    ]
    outcome = repo.write_group(writes)
    assert outcome.written == [True, False, True, True]
    assert outcome.started == []
    done, left, retried, failed = (repo.get(r.task_id) for r in rows)
    assert (done.status, done.result, done.usage.calls, done.usage.model) == (SUCCESS, {"n": 0}, 2, "m")
    assert (left.status, left.result, left.error, left.usage) == (PENDING, None, "lease lost", None)
    assert (retried.status, retried.retry_count, retried.error, retried.lease_token) == (PENDING, 1, "try again", None)
    assert (failed.status, failed.retry_count, failed.error, failed.usage.calls) == (FAILED, 1, "bad", 2)


def test_a_group_of_starts_over_pending_and_processing_rows(repo):
    from docllm.domain.tasks.model import FencedWrite, StartRequest, WriteKind

    pending = repo.create("a", "body-a")
    busy = started(repo, token="tok-other", name="b")
    done = started(repo, token="tok-done", name="c")
    assert repo.commit(done.task_id, done.attempt, {"ok": True})
    handed = started(repo, token="tok-h", name="d")
    starts = [
        StartRequest(pending.task_id, "tok-a"),
        StartRequest(busy.task_id, "tok-b"),
        StartRequest(done.task_id, "tok-c"),
        StartRequest(10_000_000, "tok-missing"),
        StartRequest(handed.task_id, "tok-d"),  # back to pending by this group's own write first
        StartRequest(pending.task_id, "tok-a2"),  # a duplicate delivery in the same group
    ]
    hand_back = FencedWrite(WriteKind.hand_back, handed.task_id, handed.attempt, error="released", counted=True)
    outcome = repo.write_group([hand_back], starts)
    assert outcome.written == [True]
    results = [o.result for o in outcome.started]
    assert results == [
        StartResult.started,
        StartResult.busy,
        StartResult.terminal,
        StartResult.missing,
        StartResult.started,
        StartResult.busy,
    ]
    a, d = outcome.started[0].task, outcome.started[4].task
    assert (a.status, a.attempt, a.lease_token, a.document) == (PROCESSING, 1, "tok-a", "body-a")
    assert (d.status, d.attempt, d.lease_token, d.handbacks) == (PROCESSING, handed.attempt + 1, "tok-d", 1)
    assert repo.get(busy.task_id).lease_token == "tok-other"
    # A start repeated after its answer was lost finds its own token: started, nothing changes.
    again = repo.write_group([], [StartRequest(pending.task_id, "tok-a")]).started[0]
    assert (again.result, again.task.attempt) == (StartResult.started, 1)


# -- rubric ---------------------------------------------------------------------------------------


def test_a_task_keeps_the_rubric_it_names_and_none_by_default(repo):
    named, plain = repo.create("guide.md", "body", rubric="install-guide"), repo.create("notes.md", "body")
    assert (named.rubric, plain.rubric) == ("install-guide", None)
    assert [t.rubric for t in repo.get_many([named.task_id, plain.task_id])] == ["install-guide", None]
    assert repo.start_attempt(named.task_id, "tok").task.rubric == "install-guide"


# -- traceparent (migration 0008) -------------------------------------------------------------------


def test_a_task_keeps_its_traceparent_and_none_by_default(repo):
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced, plain = repo.create("a.md", "body", traceparent=tp), repo.create("b.md", "body")
    assert (traced.traceparent, plain.traceparent) == (tp, None)
    assert [t.traceparent for t in repo.get_many([traced.task_id, plain.task_id])] == [tp, None]
    [listed] = [t for t in repo.non_terminal_after(None, 10) if t.task_id == traced.task_id]
    assert listed.traceparent == tp  # the reconciler's pages carry it
