"""The store batcher (docllm.runtime.store_batcher): how groups form, and that every request is answered."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from docllm.domain.errors import Unavailable
from docllm.domain.tasks.model import FencedWrite, GroupOutcome, StartRequest, WriteKind
from docllm.runtime.store_batcher import GroupedStore, StoreBatcher
from tests.support.memory.repository import InMemoryTaskRepository
from tests.support.runtime_rig import wait_until

WAIT_S = 30.0  # how long a test waits for threads to get somewhere: generous, never reached when green


class GatedStore:
    """The memory reference behind a gate: while ``gate`` is shut, a group waits in ``write_group``
    (it is in flight); each group's size is recorded. No sleeps: the test opens the gate."""

    def __init__(self):
        self.repo = InMemoryTaskRepository()
        self.groups: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_next = 0
        self.lock = threading.Lock()

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        with self.lock:
            self.groups.append(len(writes) + len(starts))
            failing = self.fail_next > 0
            self.fail_next -= failing
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        if failing:
            raise Unavailable("database down (test)")
        return self.repo.write_group(writes, starts)


class FakeClock:
    """The batcher's clock: the linger passes only when the test moves it."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def commits(store: GatedStore, n: int) -> list[FencedWrite]:
    writes = []
    for i in range(n):
        task = store.repo.create(f"t{i}", "x")
        started = store.repo.start_attempt(task.task_id, f"tok-{i}").task
        assert started is not None
        writes.append(FencedWrite(WriteKind.commit, task.task_id, started.attempt, result={"i": i}))
    return writes


class Submitted:
    """``batcher.submit_writes`` of each write on its own thread; ``results`` once joined."""

    def __init__(self, batcher: StoreBatcher, writes: list[FencedWrite]):
        self.out: list = [None] * len(writes)

        def run(i: int) -> None:
            try:
                self.out[i] = batcher.submit_writes([writes[i]]).written
            except Exception as exc:  # noqa: BLE001 - the test looks at it
                self.out[i] = exc

        self.threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(writes))]
        for t in self.threads:
            t.start()

    def results(self) -> list:
        for t in self.threads:
            t.join(WAIT_S)
            assert not t.is_alive(), "a submit never returned"
        return self.out


def held_first(store: GatedStore, batcher: StoreBatcher, write: FencedWrite) -> Submitted:
    """A first group in flight, held at the gate."""
    store.gate.clear()
    first = Submitted(batcher, [write])
    wait_until(lambda: batcher.in_flight == 1, WAIT_S)
    return first


def test_a_lone_request_goes_at_once_whatever_the_linger():
    store, clock = GatedStore(), FakeClock()
    batcher = StoreBatcher(store, linger_s=5.0, clock=clock)  # the clock never moves: a linger never ends
    write = commits(store, 1)[0]
    assert Submitted(batcher, [write]).results() == [[True]]
    assert store.groups == [1]


def test_requests_that_arrive_while_a_group_is_in_flight_go_together_after_it():
    store = GatedStore()
    batcher = StoreBatcher(store, linger_s=0.05, max_in_flight=1, clock=FakeClock())
    writes = commits(store, 11)
    first = held_first(store, batcher, writes[0])
    rest = Submitted(batcher, writes[1:])
    wait_until(lambda: batcher.waiting() == 10, WAIT_S)
    assert store.groups == [1]  # none may go beside the one in flight (max_in_flight 1)
    store.gate.set()
    assert first.results() == [[True]]
    assert rest.results() == [[True]] * 10
    assert store.groups == [1, 10]


def test_the_linger_bounds_the_wait_beside_a_group_in_flight():
    store, clock = GatedStore(), FakeClock()
    batcher = StoreBatcher(store, linger_s=0.05, max_in_flight=2, clock=clock)
    writes = commits(store, 2)
    first = held_first(store, batcher, writes[0])
    second = Submitted(batcher, writes[1:])
    wait_until(lambda: batcher.waiting() == 1, WAIT_S)
    assert store.groups == [1]  # it lingers: a group is in flight and the linger has not passed
    clock.now += 0.06
    wait_until(lambda: store.groups == [1, 1], WAIT_S)  # its own group went after the linger, beside the first
    store.gate.set()
    assert second.results() == [[True]] and first.results() == [[True]]


def test_a_group_is_never_larger_than_the_maximum():
    store = GatedStore()
    batcher = StoreBatcher(store, linger_s=0.5, max_group=4, max_in_flight=1, clock=FakeClock())
    writes = commits(store, 13)
    first = held_first(store, batcher, writes[0])
    rest = Submitted(batcher, writes[1:])
    wait_until(lambda: batcher.waiting() == 12, WAIT_S)
    store.gate.set()
    assert first.results() == [[True]] and rest.results() == [[True]] * 12
    assert store.groups == [1, 4, 4, 4]


def test_a_failed_group_answers_each_of_its_requests_with_the_error_and_loses_none():
    store = GatedStore()
    batcher = StoreBatcher(store, linger_s=0.02, max_in_flight=1, clock=FakeClock())
    writes = commits(store, 6)
    store.fail_next = 2  # the first two groups fail
    first = held_first(store, batcher, writes[0])
    rest = Submitted(batcher, writes[1:])
    wait_until(lambda: batcher.waiting() == 5, WAIT_S)
    store.gate.set()
    assert isinstance(first.results()[0], Unavailable)
    assert all(isinstance(r, Unavailable) for r in rest.results())  # the second group carried all five
    assert store.groups == [1, 5]
    # Nothing was lost: each caller retries, as it would a single write, and lands.
    assert Submitted(batcher, writes).results() == [[True]] * 6
    assert batcher.in_flight == 0 and batcher.waiting() == 0


def test_a_batch_of_starts_does_not_queue_behind_the_ends_in_flight():
    """Issue 24's bursts: the next requests wait on a claimed batch's starts, so they have a group
    of their own, not a place behind a burst's ends (here every end group is held in flight)."""
    ends, starts = GatedStore(), GatedStore()
    starts.repo = ends.repo  # one database, two ways in
    grouped = GroupedStore(ends.repo, StoreBatcher(ends), StoreBatcher(starts))
    writes = commits(ends, 3)
    ends.gate.clear()
    held = []
    for write, (in_flight, waiting) in zip(writes, [(1, 0), (2, 0), (2, 1)], strict=True):
        held.append(Submitted(grouped.ends, [write]))  # two groups in flight (the most), then one waits
        wait_until(lambda f=in_flight, w=waiting: (grouped.ends.in_flight, grouped.ends.waiting()) == (f, w), WAIT_S)
    task = ends.repo.create("next", "x")
    started: list = []
    starter = threading.Thread(
        target=lambda: started.append(grouped.write_group((), [StartRequest(task.task_id, "tok-next")])), daemon=True
    )
    starter.start()
    starter.join(WAIT_S)
    assert started and started[0].started[0].task is not None, "the start waited behind the ends"
    assert ends.groups == [1, 1] and starts.groups == [1]
    ends.gate.set()
    assert [h.results() for h in held] == [[[True]]] * 3


def test_the_single_row_writes_of_the_grouped_store_are_groups_of_one():
    store = GatedStore()
    grouped = GroupedStore(store.repo, StoreBatcher(store), StoreBatcher(store))
    task = grouped.create("a", "x")
    assert grouped.start_attempt(task.task_id, "tok").task.attempt == 1
    assert grouped.commit(task.task_id, 1, {"ok": 1})
    assert not grouped.commit(task.task_id, 1, {"ok": 2})
    assert grouped.get(task.task_id).result == {"ok": 1}
    assert store.groups == [1, 1, 1]
