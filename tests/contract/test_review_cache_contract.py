"""One contract for the review cache's store (issue 46): in memory, SQLite (a file) and a real MariaDB.

The point is I17: an entry is written by the commit it came from, in the same write, and only when
that commit lands; a commit whose fence fails (a stale attempt, a second worker on the same task)
writes nothing. Then the reads: expiry by the authority's time, the newest answer of a key kept,
and a sweep that removes at most a page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from docllm.domain.ports import ReviewCache
from docllm.domain.review.cache import CachedChunk
from docllm.domain.tasks.model import FencedWrite, StartResult, Task, WriteKind
from docllm.domain.tasks.ports import TaskRepository
from tests.support.memory.repository import InMemoryTaskRepository
from tests.support.memory.review_cache import InMemoryReviewCache

T0 = 1_700_000_000_000  # authority ms
FAR = T0 + 10**9  # no entry below is stamped ahead of now
ANSWER = {
    "findings": [
        {
            "category": "clarity",
            "severity": "low",
            "location": {"heading": "Install", "line_start": 2, "line_end": 3},
            "quote": "run it — 安装",
            "message": "say how",
            "suggestion": "",
        }
    ],
    "summary": "fine",
}


@dataclass
class Store:
    repo: TaskRepository
    cache: ReviewCache


@pytest.fixture(params=["memory", "sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def store(request, tmp_path) -> Iterator[Store]:
    if request.param == "memory":
        repo = InMemoryTaskRepository()
        yield Store(repo, InMemoryReviewCache(repo))
        return
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
    from docllm.adapters.sql.review_cache import SqlAlchemyReviewCache

    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield Store(SqlAlchemyTaskRepository(engine), SqlAlchemyReviewCache(engine))
    engine.dispose()


def entry(key: str, task_id: int, at: int = T0, answer: dict | None = None, model: str = "m") -> CachedChunk:
    return CachedChunk(key, answer or ANSWER, model, None, task_id, at, 120, 30)


def started(repo: TaskRepository, token: str = "tok-1") -> Task:
    task = repo.create("doc.md", "# Install\n\nrun it\n")
    outcome = repo.start_attempt(task.task_id, token)
    assert outcome.result is StartResult.started and outcome.task is not None
    return outcome.task


def commit(repo: TaskRepository, task: Task, *entries: CachedChunk, attempt: int | None = None) -> bool:
    n = task.attempt if attempt is None else attempt
    write = FencedWrite(WriteKind.commit, task.task_id, n, result={"summary": "x"}, cache=entries)
    return repo.write_group([write]).written[0]


def key(c: str) -> str:
    return c * 64


def test_adapter_has_every_method_of_the_port(store):
    wanted = {name for name in vars(ReviewCache) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(store.cache, name, None))} == set()


def test_a_commit_that_lands_writes_its_entries_and_they_read_back_whole(store):
    task = started(store.repo)
    assert commit(store.repo, task, entry(key("a"), task.task_id), entry(key("b"), task.task_id, model="m2"))
    found = store.cache.find([key("a"), key("b"), key("c")], T0, FAR)
    assert set(found) == {key("a"), key("b")}
    assert found[key("a")] == entry(key("a"), task.task_id)  # every field, the answer's text included
    assert found[key("b")].model == "m2"


def test_a_commit_whose_fence_fails_writes_no_entry(store):
    """Two workers on one task: the one that lost the row (its attempt is no longer the row's)
    commits nothing, so none of its answers is ever served (I17)."""
    first = started(store.repo)
    assert store.repo.hand_back(first.task_id, first.attempt, "lease lost")  # the reaper's move
    second = store.repo.start_attempt(first.task_id, "tok-2").task
    assert second is not None and second.attempt == first.attempt + 1
    assert not commit(store.repo, first, entry(key("a"), first.task_id), attempt=first.attempt)
    assert store.cache.find([key("a")], 0, FAR) == {}
    assert commit(store.repo, second, entry(key("b"), second.task_id))
    assert not commit(store.repo, second, entry(key("c"), second.task_id))  # again: the row is success now
    assert set(store.cache.find([key("a"), key("b"), key("c")], 0, FAR)) == {key("b")}


def test_in_a_group_only_the_commits_that_land_write(store):
    a, b = started(store.repo, "tok-a"), started(store.repo, "tok-b")
    writes = [
        FencedWrite(WriteKind.commit, a.task_id, a.attempt, result={}, cache=(entry(key("a"), a.task_id),)),
        FencedWrite(WriteKind.commit, b.task_id, b.attempt + 7, result={}, cache=(entry(key("b"), b.task_id),)),
    ]
    assert store.repo.write_group(writes).written == [True, False]
    assert set(store.cache.find([key("a"), key("b")], 0, FAR)) == {key("a")}


def test_entries_older_than_since_are_not_found(store):
    task = started(store.repo)
    assert commit(store.repo, task, entry(key("a"), task.task_id, at=T0), entry(key("b"), task.task_id, at=T0 + 10))
    assert set(store.cache.find([key("a"), key("b")], T0 + 1, FAR)) == {key("b")}
    assert set(store.cache.find([key("a"), key("b")], T0, FAR)) == {key("a"), key("b")}


def test_a_later_commit_of_a_key_replaces_its_answer(store):
    """A ``--fresh`` review replaces the entry it bypassed; the reads see the newest."""
    first, second = started(store.repo, "tok-a"), started(store.repo, "tok-b")
    assert commit(store.repo, first, entry(key("a"), first.task_id, at=T0))
    newer = {"findings": [], "summary": "fresh"}
    assert commit(store.repo, second, entry(key("a"), second.task_id, at=T0 + 5, answer=newer))
    found = store.cache.find([key("a")], 0, FAR)[key("a")]
    assert (found.task_id, found.created_ms, found.answer) == (second.task_id, T0 + 5, newer)


def test_a_sweep_removes_at_most_its_page_of_expired_entries_oldest_first(store):
    task = started(store.repo)
    entries = [entry(key(c), task.task_id, at=T0 + i) for i, c in enumerate("abcdef")]
    assert commit(store.repo, task, *entries)
    assert store.cache.sweep(T0 + 4, FAR, 3) == 3  # a, b, c of the expired a..d
    assert set(store.cache.find([key(c) for c in "abcdef"], 0, FAR)) == {key("d"), key("e"), key("f")}
    assert store.cache.sweep(T0 + 4, FAR, 3) == 1  # d
    assert store.cache.sweep(T0 + 4, FAR, 3) == 0
    assert set(store.cache.find([key(c) for c in "abcdef"], 0, FAR)) == {key("e"), key("f")}


def test_entries_stamped_ahead_of_now_are_neither_found_nor_kept(store):
    """Stamped by an authority clock that stepped back since: their age is unknown."""
    task = started(store.repo)
    assert commit(store.repo, task, entry(key("a"), task.task_id, at=T0), entry(key("b"), task.task_id, at=T0 + 500))
    assert set(store.cache.find([key("a"), key("b")], T0 - 10, T0 + 100)) == {key("a")}
    assert store.cache.sweep(T0 - 10, T0 + 100, 5) == 1
    assert set(store.cache.find([key("a"), key("b")], 0, FAR)) == {key("a")}


def test_many_keys_are_found_in_one_call(store):
    task = started(store.repo)
    keys = [f"{i:064x}" for i in range(1200)]  # more than one IN list's worth
    assert commit(store.repo, task, *(entry(k, task.task_id) for k in keys[::2]))
    assert set(store.cache.find(keys, 0, FAR)) == set(keys[::2])


def test_an_answer_with_a_lone_surrogate_is_stored_replaced_and_the_commit_lands(store):
    """A model's answer may hold a lone surrogate (issue 44): the entry must not refuse the commit."""
    task = started(store.repo)
    odd = {"findings": [], "summary": "bad \ud800 char"}
    assert commit(store.repo, task, entry(key("a"), task.task_id, answer=odd))
    summary = store.cache.find([key("a")], 0, FAR)[key("a")].answer["summary"]
    assert summary in ("bad \ufffd char", "bad \ud800 char")  # replaced by the databases; memory keeps it
    assert store.repo.get(task.task_id).status.value == "success"


def test_a_fresh_task_is_recorded_on_its_row(store):
    plain = store.repo.create("a.md", "x")
    fresh = store.repo.create("b.md", "x", fresh=True)
    assert (store.repo.get(plain.task_id).fresh, store.repo.get(fresh.task_id).fresh) == (False, True)
    assert fresh.fresh is True
