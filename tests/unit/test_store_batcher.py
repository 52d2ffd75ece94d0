"""The store batcher (docllm.runtime.store_batcher): how groups form, and that every request is answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from docllm.domain.errors import Unavailable
from docllm.domain.model import FencedWrite, GroupOutcome, StartRequest, WriteKind
from docllm.runtime.store_batcher import GroupedStore, StoreBatcher
from tests.support.memory.repository import InMemoryTaskRepository


class SlowStore:
    """The memory reference behind a gate: each group waits for ``release`` (when given) and is recorded."""

    def __init__(self, hold: float = 0.0):
        self.repo = InMemoryTaskRepository()
        self.groups: list[int] = []
        self.hold = hold
        self.fail_next = 0
        self.lock = threading.Lock()

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        with self.lock:
            self.groups.append(len(writes) + len(starts))
            failing = self.fail_next > 0
            self.fail_next -= failing
        time.sleep(self.hold)
        if failing:
            raise Unavailable("database down (test)")
        return self.repo.write_group(writes, starts)


def commits(store: SlowStore, n: int) -> list[FencedWrite]:
    writes = []
    for i in range(n):
        task = store.repo.create(f"t{i}", "x")
        started = store.repo.start_attempt(task.task_id, f"tok-{i}").task
        assert started is not None
        writes.append(FencedWrite(WriteKind.commit, task.task_id, started.attempt, result={"i": i}))
    return writes


def in_threads(fn, items) -> list:
    out: list = [None] * len(items)

    def run(i):
        try:
            out[i] = fn(items[i])
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return out


def test_a_lone_request_goes_at_once_whatever_the_linger():
    store = SlowStore()
    batcher = StoreBatcher(store, linger_s=5.0)
    write = commits(store, 1)[0]
    started = time.perf_counter()
    assert batcher.submit([write]).written == [True]
    assert time.perf_counter() - started < 0.5
    assert store.groups == [1]


def test_requests_that_arrive_while_a_group_is_in_flight_go_together_within_the_linger():
    store = SlowStore(hold=0.2)
    batcher = StoreBatcher(store, linger_s=0.05, max_in_flight=1)
    writes = commits(store, 11)
    first = threading.Thread(target=batcher.submit, args=([writes[0]],))
    first.start()
    time.sleep(0.05)  # the first group is in flight: the rest wait for it
    started = time.perf_counter()
    results = in_threads(lambda w: batcher.submit([w]).written, writes[1:])
    first.join()
    assert results == [[True]] * 10
    assert store.groups == [1, 10]
    assert time.perf_counter() - started < 0.2 + 0.2 + 0.15  # the first group, then the second, no more


def test_the_linger_bounds_the_wait_beside_a_group_in_flight():
    store = SlowStore(hold=0.5)
    batcher = StoreBatcher(store, linger_s=0.05, max_in_flight=2)
    writes = commits(store, 2)
    first = threading.Thread(target=batcher.submit, args=([writes[0]],))
    first.start()
    time.sleep(0.05)
    started = time.perf_counter()
    assert batcher.submit([writes[1]]).written == [True]
    waited = time.perf_counter() - started
    first.join()
    assert waited < 0.5 + 0.05 + 0.2  # its own group went after the linger, not after the first one
    assert store.groups == [1, 1]


def test_a_group_is_never_larger_than_the_maximum():
    store = SlowStore(hold=0.1)
    batcher = StoreBatcher(store, linger_s=0.5, max_group=4, max_in_flight=1)
    writes = commits(store, 13)
    first = threading.Thread(target=batcher.submit, args=([writes[0]],))
    first.start()
    time.sleep(0.03)
    results = in_threads(lambda w: batcher.submit([w]).written, writes[1:])
    first.join()
    assert results == [[True]] * 12
    assert max(store.groups) <= 4 and sum(store.groups) == 13


def test_a_failed_group_answers_each_of_its_requests_with_the_error_and_loses_none():
    store = SlowStore(hold=0.1)
    batcher = StoreBatcher(store, linger_s=0.02, max_in_flight=1)
    writes = commits(store, 6)
    store.fail_next = 2  # the first two groups fail
    first = threading.Thread(target=lambda: pytest.raises(Unavailable, batcher.submit, [writes[0]]))
    first.start()
    time.sleep(0.03)
    results = in_threads(lambda w: batcher.submit([w]).written, writes[1:])
    first.join()
    assert all(isinstance(r, Unavailable) for r in results)  # the second group carried all five
    assert store.groups == [1, 5]
    # Nothing was lost: each caller retries, as it would a single write, and lands.
    assert in_threads(lambda w: batcher.submit([w]).written, writes) == [[True]] * 6
    assert batcher.in_flight == 0


def test_the_single_row_writes_of_the_grouped_store_are_groups_of_one():
    store = SlowStore()
    grouped = GroupedStore(store.repo, StoreBatcher(store))
    task = grouped.create("a", "x")
    assert grouped.start_attempt(task.task_id, "tok").task.attempt == 1
    assert grouped.commit(task.task_id, 1, {"ok": 1})
    assert not grouped.commit(task.task_id, 1, {"ok": 2})
    assert grouped.get(task.task_id).result == {"ok": 1}
    assert store.groups == [1, 1, 1]
