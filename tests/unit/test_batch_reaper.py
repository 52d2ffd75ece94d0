"""The reaper and the batch lane (issue 28): an expired lease of an attempt its unfinished batch
runs is handed back uncharged (its poller died: not the document's doing), counted towards the
task's bounded hand-backs (I12); past that bound, and for a batch already finished, it is charged
as any expired lease. In-memory queue (the production Lua on fakeredis), repository and batch store."""

from __future__ import annotations

from docllm.domain.batches.model import BatchState
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reaper import BATCH_LEASE_EXPIRED, Reaper
from sim.manual_clock import ManualClock
from tests.support.memory.batches import InMemoryBatchStore
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

LEASE = LeasePolicy(lease_seconds=3)
RETRY = RetryPolicy(max_attempts=3, max_handbacks=2)


def started(batched: bool, state: BatchState = BatchState.submitted):
    clock = ManualClock()
    queue, repo, store = InMemoryTaskQueue(clock), InMemoryTaskRepository(), InMemoryBatchStore()
    task = submit(repo, queue, "d.md", "# doc\n", priority="bulk")
    proc = TaskProcessor(queue, repo, None, clock, RETRY, LEASE, "batcher")  # type: ignore[arg-type]
    [attempt] = [a for a in proc.begin_batch(proc.claim_batch(1, ("bulk",))) if isinstance(a, Attempt)]
    if batched:
        store.open("r1", "default", [(task.task_id, attempt.number)], clock.now_ms())
        if state is not BatchState.open:
            store.advance("r1", BatchState.open, BatchState.submitted, clock.now_ms(), batch_id="b1")
        if state.terminal:
            store.advance("r1", BatchState.submitted, state, clock.now_ms())
    reaper = Reaper(queue, repo, RETRY, lease_ms=LEASE.lease_ms, batches=store)
    clock.advance(LEASE.lease_ms + 1)  # the poller died: nobody renews the member's lease
    return reaper, repo, task.task_id


def test_an_expired_lease_of_a_batched_attempt_is_handed_back_uncharged_and_counted():
    reaper, repo, task_id = started(batched=True)
    assert reaper.reap_once() == 1
    row = repo.get(task_id)
    assert (row.status, row.retry_count, row.handbacks, row.error) == (TaskStatus.pending, 0, 1, BATCH_LEASE_EXPIRED)


def test_an_expired_lease_outside_a_running_batch_is_charged_as_ever():
    for reaper, repo, task_id in (started(batched=False), started(batched=True, state=BatchState.applied)):
        reaper.reap_once()
        row = repo.get(task_id)
        assert (row.status, row.retry_count, row.handbacks) == (TaskStatus.pending, 1, 0)


def test_past_its_bound_of_hand_backs_a_batched_attempt_is_charged():
    reaper, repo, task_id = started(batched=True)
    row = repo.get(task_id)
    repo._update(task_id, lambda r: True, handbacks=RETRY.max_handbacks)  # it was handed back as often as allowed
    reaper.reap_once()
    row = repo.get(task_id)
    assert (row.retry_count, row.handbacks) == (1, RETRY.max_handbacks)


def test_an_expired_lease_of_a_member_of_a_returned_batch_is_handed_back_uncharged():
    """A poller that found the member's lease lapsed (a database outage kept every poller from
    renewing it) returns the batch without it: the reaper hands it back uncharged, counted (found
    by the simulation's batches scenario, seed 28, where it was charged as a crash)."""
    reaper, repo, task_id = started(batched=True, state=BatchState.returned)
    assert reaper.reap_once() == 1
    row = repo.get(task_id)
    assert (row.status, row.retry_count, row.handbacks, row.error) == (TaskStatus.pending, 0, 1, BATCH_LEASE_EXPIRED)
