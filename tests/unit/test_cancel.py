"""``docllm cancel``: the Canceller over in-memory ports, an attempt that starts on a cancelled
task, and a running attempt stopped at its worker's next heartbeat (the real Worker, on virtual time)."""

from __future__ import annotations

import asyncio

from docllm.domain import events as ev
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.cancel import Canceller, CancelResult
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.outcome import CANCELLED_ERROR, Outcome
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import retry_dead, submit
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository
from tests.support.runtime_rig import FakeReviewer, Rig, run

FAILED, PENDING, PROCESSING = TaskStatus.failed, TaskStatus.pending, TaskStatus.processing


def ports():
    clock = ManualClock()
    return InMemoryTaskQueue(clock), InMemoryTaskRepository(), clock


def processor(queue, repo, clock):
    return TaskProcessor(queue, repo, FakeReviewer(), clock, RetryPolicy(max_attempts=3), LeasePolicy(), "w1")


def test_a_pending_task_is_failed_at_once_and_its_payload_is_acked_by_the_claim_that_finds_it():
    queue, repo, clock = ports()
    task = submit(repo, queue, "a.md", "# A\n")
    [cancel] = Canceller(repo, queue).request([task.task_id])
    assert (cancel.result, cancel.status, cancel.done) == (CancelResult.cancelled, "failed", True)
    row = repo.get(task.task_id)
    assert (row.status, row.error, row.attempt) == (FAILED, CANCELLED_ERROR, 0)
    assert queue.cancel_marks([task.task_id]) == set()  # settled: no mark left behind
    proc = processor(queue, repo, clock)
    [delivery] = proc.claim_batch(1)
    assert proc.begin(delivery) is None  # never runs
    assert queue.stats() == queue.stats().__class__(0, 0, 0, 0, None)  # acked, not dead-lettered
    assert repo.get(task.task_id).attempt == 0


def test_unknown_and_finished_tasks_are_reported_not_cancelled():
    queue, repo, _ = ports()
    done = submit(repo, queue, "done.md", "x")
    started = repo.start_attempt(done.task_id, "t").task
    repo.commit(done.task_id, started.attempt, {"findings": []})
    results = Canceller(repo, queue).request([done.task_id, 999, 999])
    assert [(c.task_id, c.result, c.status) for c in results] == [
        (done.task_id, CancelResult.finished, "success"),
        (999, CancelResult.unknown, None),
    ]
    assert "already success" in results[0].detail and queue.cancel_marks([done.task_id, 999]) == set()


def test_a_running_task_is_marked_and_reported_cancelled_once_its_worker_failed_it():
    queue, repo, clock = ports()
    task = submit(repo, queue, "a.md", "x")
    proc = processor(queue, repo, clock)
    attempt = proc.begin(proc.claim_batch(1)[0])
    canceller = Canceller(repo, queue)
    [cancel] = canceller.request([task.task_id])
    assert (cancel.result, cancel.done) == (CancelResult.running, False)
    assert proc.cancelled([attempt]) == {task.task_id}  # what the heartbeat reads
    assert canceller.check(cancel).result is CancelResult.running
    assert proc.finish(attempt, Outcome.cancelled())
    assert canceller.check(cancel).result is CancelResult.cancelled
    assert queue.cancel_marks([task.task_id]) == set() and queue.stats().processing == 0
    assert queue.dead_letters() == []


def test_a_running_task_whose_worker_died_is_cancelled_once_the_reaper_put_it_back():
    queue, repo, clock = ports()
    task = submit(repo, queue, "a.md", "x")
    proc = processor(queue, repo, clock)
    attempt = proc.begin(proc.claim_batch(1)[0])
    canceller = Canceller(repo, queue)
    [cancel] = canceller.request([task.task_id])
    repo.retry(task.task_id, attempt.number, "lease expired")  # what the reaper writes
    cancel = canceller.check(cancel)
    assert cancel.result is CancelResult.cancelled and repo.get(task.task_id).status is FAILED


def test_an_attempt_that_starts_on_a_marked_task_fails_it_before_any_review():
    queue, repo, clock = ports()
    task = submit(repo, queue, "a.md", "x")
    queue.mark_cancelled([task.task_id])  # marked while running, then reclaimed and requeued
    proc = processor(queue, repo, clock)
    assert proc.begin(proc.claim_batch(1)[0]) is None
    row = repo.get(task.task_id)
    assert (row.status, row.error, row.attempt) == (FAILED, CANCELLED_ERROR, 1)
    assert queue.stats().processing == 0 and queue.cancel_marks([task.task_id]) == set()


def test_an_operators_retry_reopens_a_cancelled_task_and_it_runs():
    queue, repo, clock = ports()
    task = submit(repo, queue, "a.md", "x")
    queue.mark_cancelled([task.task_id])
    proc = processor(queue, repo, clock)
    assert proc.begin(proc.claim_batch(1)[0]) is None
    assert retry_dead(repo, queue, None) == []  # not a dead letter: --all leaves it alone
    assert retry_dead(repo, queue, task.task_id) == [task.task_id]
    assert proc.begin(proc.claim_batch(1)[0]) is not None  # the mark went with the retry


def test_the_worker_stops_a_cancelled_review_at_its_next_heartbeat_and_commits_nothing():
    rig = Rig(FakeReviewer(30.0), lease=0.6, concurrency=2)
    cancelled, other = rig.submit(2)
    canceller = Canceller(rig.repo, rig.queue)

    async def scenario(rig):
        await rig.until(lambda: rig.statuses([cancelled, other]) == [PROCESSING, PROCESSING])
        [cancel] = canceller.request([cancelled])
        assert cancel.result is CancelResult.running
        t0 = asyncio.get_running_loop().time()
        await rig.until(lambda: canceller.check(cancel).result is CancelResult.cancelled, timeout=5)
        return asyncio.get_running_loop().time() - t0

    took = run(rig, scenario)
    assert took < 0.6  # within a heartbeat (lease / 3 = 0.2 s) and its writes
    row = rig.repo.get(cancelled)
    assert (row.status, row.error, row.result) == (FAILED, CANCELLED_ERROR, None)
    assert rig.reviewer.cancelled == 2  # the cancelled one at once; the other at the test's stop
    abandoned = [f for name, f in rig.events.events if name == ev.ABANDONED]
    assert abandoned[0]["task_id"] == cancelled and abandoned[0]["reason"] == "cancelled"
    assert ev.SUCCEEDED not in rig.events.names() and rig.queue.dead_letters() == []
    assert rig.repo.get(other).status is PENDING  # released at the stop, untouched by the cancel
