"""The leftover sweep (ARCHITECTURE.md, Switching over) over the in-memory adapters: what the original note's
workers leave in Redis is released after two sightings a grace apart, and nothing runs twice."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from docllm.domain import events as ev
from docllm.domain.events import RecordingEvents
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.leftovers import LeftoverSweep
from docllm.domain.tasks.model import Attempt, Delivery, Leftovers, Task, TaskStatus
from docllm.domain.tasks.outcome import Outcome
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.reconciler import Reconciler
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

GRACE = 60_000
LEASE = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)


class Reviewer:
    """Never called: attempts finish with a ready report, so these tests do not depend on how the
    processor calls its reviewer. What ran is read from the ``started`` events."""

    name = "stub"

    def review(self, task_name, document, rubric=None):
        raise AssertionError("not called")

    def check(self):
        pass


def report(task_id: int) -> Outcome:
    return Outcome.success({"findings": [], "summary": f"reviewed {task_id}"})


class World:
    def __init__(self) -> None:
        self.clock = ManualClock()
        tokens = itertools.count(1)
        self.queue = InMemoryTaskQueue(self.clock, token_factory=lambda: f"t{next(tokens)}")
        self.repo = InMemoryTaskRepository(self.clock)
        self.events = RecordingEvents()
        self.reviewer = Reviewer()
        self.sweep = LeftoverSweep(self.queue, self.repo, self.clock, GRACE, events=self.events)

    def started(self) -> list[str]:
        """The task name of every attempt that started, in order."""
        return [self.row(f["task_id"]).task_name for name, f in self.events.events if name == ev.STARTED]

    def row(self, task_id: int) -> Task:
        """The row of a task the test created."""
        task = self.repo.get(task_id)
        assert task is not None
        return task

    def old_producer(self, name: str) -> int:
        """The original producer: INSERT the row, LPUSH the payload (ensure_ascii=False)."""
        task = self.repo.create(name, f"# {name}\n\ntext\n")
        self.queue.push(make_payload(task.task_id, name))
        return task.task_id

    def old_worker_dies(self, mark_processing: bool, stamp: bool = True) -> int:
        """BRPOPLPUSH (+ HSET processing_ts), maybe mark_task_processing, then the container dies."""
        raw = self.queue.original_take("1700000000" if stamp else None)
        assert raw is not None, "nothing in ready for the old worker to take"
        task_id = json.loads(raw)["task_id"]
        if mark_processing:
            self.mark_processing(task_id)
        return task_id

    def mark_processing(self, task_id: int) -> None:
        """The old code's ``mark_task_processing``: status=processing, no lease token, no attempt."""
        self.repo._rows[task_id] = replace(self.repo._rows[task_id], status=TaskStatus.processing)

    def worker(self, name: str = "w") -> TaskProcessor:
        return TaskProcessor(
            self.queue,
            self.repo,
            self.reviewer,
            self.clock,
            RetryPolicy(max_attempts=3),
            LEASE,
            name,
            events=self.events,
        )

    def run_all(self) -> None:
        proc = self.worker()
        while (delivery := proc.claim()) is not None:
            attempt = proc.begin(delivery)
            if attempt is not None:
                assert proc.finish(attempt, report(attempt.task_id))


def claimed(proc: TaskProcessor) -> Delivery:
    """A claim the test expects to find a payload."""
    delivery = proc.claim()
    assert delivery is not None
    return delivery


def begun(proc: TaskProcessor) -> Attempt:
    """A claim and the attempt the test expects it to start."""
    attempt = proc.begin(claimed(proc))
    assert attempt is not None
    return attempt


@pytest.fixture
def w() -> World:
    return World()


def test_a_leftover_is_released_after_two_sightings_a_grace_apart(w: World) -> None:  # D1/D2
    task_id = w.old_producer("接口文档")
    w.old_worker_dies(mark_processing=False)
    assert w.sweep.sweep_once() == 0  # first sighting
    w.clock.advance(GRACE - 1)
    assert w.sweep.sweep_once() == 0
    w.clock.advance(1)
    assert w.sweep.sweep_once() == 1
    assert w.queue.leftovers(100) == Leftovers()
    w.run_all()
    assert w.row(task_id).status is TaskStatus.success
    assert w.started() == ["接口文档"]


def test_a_row_the_old_worker_marked_processing_is_handed_back_and_runs(w: World) -> None:  # D3
    task_id = w.old_producer("t")
    w.old_worker_dies(mark_processing=True)
    w.sweep.sweep_once()
    w.clock.advance(GRACE)
    assert w.sweep.sweep_once() == 1
    row = w.row(task_id)
    assert (row.status, row.retry_count, row.attempt) == (TaskStatus.pending, 0, 0)
    w.run_all()  # without the hand-back the released payload would meet a busy row and be dropped
    assert w.row(task_id).status is TaskStatus.success


def test_stamps_without_a_payload_are_deleted(w: World) -> None:
    w.queue.original_stamp(42, "1700000000")
    w.sweep.sweep_once()
    w.clock.advance(GRACE)
    w.sweep.sweep_once()
    assert w.queue.leftovers(100) == Leftovers()


def test_a_live_lease_is_never_touched(w: World) -> None:
    task_id = w.old_producer("t")
    proc = w.worker()
    attempt = begun(proc)
    for _ in range(15):  # 150 s: sweeps more than two graces apart, heartbeats every lease/3
        assert w.sweep.sweep_once() == 0
        w.clock.advance(LEASE.lease_ms // 3)
        assert proc.heartbeat(attempt)
    assert proc.finish(attempt, report(attempt.task_id))
    assert w.row(task_id).status is TaskStatus.success


def test_a_leftover_that_went_away_and_came_back_starts_its_grace_over(w: World) -> None:
    w.old_producer("t")
    w.old_worker_dies(mark_processing=False)
    w.sweep.sweep_once()
    found = w.queue.leftovers(100)
    w.queue.release_leftovers(found.payloads, found.stamps, w.clock.now_ms())  # someone else released it
    w.clock.advance(GRACE)
    w.sweep.sweep_once()  # not there: forgotten
    w.queue.original_take("1700000001")  # an old worker took it again and died
    w.clock.advance(1)
    assert w.sweep.sweep_once() == 0
    w.clock.advance(GRACE)
    assert w.sweep.sweep_once() == 1


def test_with_the_reconciler_every_open_task_runs_once_and_nothing_is_left(w: World) -> None:
    ids = [w.old_producer(f"t{i}") for i in range(6)]
    w.old_worker_dies(mark_processing=True)  # D3: processing row, payload in processing
    w.old_worker_dies(mark_processing=False)  # D2: pending row, payload in processing
    w.old_worker_dies(mark_processing=True, stamp=False)  # D1 and D3
    lost = w.repo.create("t6", "# t6\n")  # a row processing with nothing in Redis (D10)
    w.mark_processing(lost.task_id)
    ids.append(lost.task_id)
    w.queue.original_stamp(99, "1700000000")  # a stamp whose payload is gone
    rec = Reconciler(w.queue, w.repo, w.clock, GRACE, leftovers=w.sweep)
    for _ in range(3):
        rec.reconcile_once()
        w.clock.advance(GRACE // 2)
    w.run_all()
    assert {w.row(i).status for i in ids} == {TaskStatus.success}
    assert sorted(w.started()) == sorted(f"t{i}" for i in range(7))  # each once
    assert w.queue.leftovers(100) == Leftovers()
    stats = w.queue.stats()
    assert (stats.ready, stats.processing, stats.delayed, stats.dead) == (0, 0, 0, 0)


def test_a_payload_delivered_twice_starts_one_attempt(w: World) -> None:  # fencing
    task_id = w.old_producer("t")
    w.old_worker_dies(mark_processing=True)
    # The reconciler alone (no sweep) recovers the row and pushes a copy; then the sweep releases
    # the old copy too: two deliveries of one task, both in ready at once.
    alone = Reconciler(w.queue, w.repo, w.clock, GRACE)
    alone.reconcile_once()
    w.sweep.sweep_once()
    w.clock.advance(GRACE)
    alone.reconcile_once()
    assert w.sweep.sweep_once() == 1
    assert w.queue.stats().ready == 2
    first, second = w.worker("a"), w.worker("b")
    attempt = begun(first)
    assert second.begin(claimed(second)) is None  # busy: acknowledged, not run
    assert first.finish(attempt, report(attempt.task_id))
    assert w.started() == ["t"] and w.row(task_id).attempt == 1
    assert w.queue.stats().ready == 0 and w.queue.leftovers(100) == Leftovers()
