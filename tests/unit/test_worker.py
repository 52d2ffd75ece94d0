"""The event-loop runtime: one dispatcher, batched heartbeats, lost leases, maximum runtime, shutdown,
bad LLM configuration, and cancellation of abandoned reviews (I11). In-memory adapters, real threads
for the port calls, real (short) time."""

from __future__ import annotations

import asyncio
import logging
import time

from docllm.adapters.memory_breaker import InMemoryLlmBreaker
from docllm.adapters.memory_queue import InMemoryTaskQueue
from docllm.adapters.memory_repository import InMemoryTaskRepository
from docllm.domain import events as ev
from docllm.domain.breaker import BreakerPolicy
from docllm.domain.errors import ConfigurationError
from docllm.domain.events import RecordingEvents
from docllm.domain.model import TaskStatus
from docllm.domain.policies import LeasePolicy, RetryPolicy
from docllm.domain.services.attempts import TaskProcessor
from docllm.domain.services.producer import submit
from docllm.domain.services.reaper import Reaper
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import ThreadedPortCalls
from docllm.runtime.worker import Worker


class RealClock:
    def now_ms(self) -> int:
        return int(time.monotonic() * 1000)


class FakeReviewer:
    """Takes ``seconds`` per review; counts reviews running at once, calls and cancellations."""

    name = "fake"

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.running = self.peak = self.calls = self.cancelled = self.completed = 0
        self.broken = False  # ConfigurationError while True
        self.refused: set[str] = set()  # documents a filtering gateway refuses (403) while the key works

    async def review(self, task_name, document):
        if self.broken or task_name in self.refused:
            raise ConfigurationError("401 Unauthorized: check DOCLLM_LLM_API_KEY")
        self.calls += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        self.completed += 1
        return {"findings": [], "summary": "ok"}

    async def check(self):
        if self.broken:
            raise ConfigurationError("still 401")


class CountingQueue(InMemoryTaskQueue):
    """Records the claim batches and heartbeat batches the worker sends."""

    def __init__(self, clock):
        super().__init__(clock)
        self.claims: list[int] = []
        self.stages = 0
        self.extends: list[int] = []

    def claim_batch(self, holder, lease_ms, limit):
        self.claims.append(limit)
        return super().claim_batch(holder, lease_ms, limit)

    def stage(self, timeout_s):
        self.stages += 1
        return super().stage(timeout_s)

    def extend_many(self, tokens, lease_ms):
        self.extends.append(len(tokens))
        return super().extend_many(tokens, lease_ms)


class Rig:
    def __init__(self, reviewer, lease=0.3, max_runtime=30.0, concurrency=2, idle_wait=0.05, breaker=None):
        self.clock = RealClock()
        self.queue = CountingQueue(self.clock)
        self.repo = InMemoryTaskRepository()
        self.events = RecordingEvents()
        self.reviewer = reviewer
        self.lease = LeasePolicy(lease_seconds=lease, max_runtime_seconds=max_runtime, reaper_interval_seconds=0.05)
        self.retry = RetryPolicy(max_attempts=3, base_seconds=0.05, cap_seconds=0.1)
        self.proc = TaskProcessor(
            self.queue, self.repo, reviewer, self.clock, self.retry, self.lease, "w", events=self.events
        )
        self.calls = ThreadedPortCalls(4)
        policy = breaker or BreakerPolicy(window_seconds=10, failure_ratio=0.5, min_calls=5, open_seconds=0.3)
        self.breaker = InMemoryLlmBreaker(self.clock, policy)
        self.gate = LlmGate(
            reviewer,
            self.breaker,
            self.calls,
            "w",
            logging.getLogger("test"),
            self.events,
            poll_seconds=0.05,
            base=0.05,
            cap=0.1,
        )
        self.worker = Worker(self.proc, self.calls, self.gate, concurrency, idle_wait_seconds=idle_wait)

    def submit(self, n=1, prefix="d"):
        return [submit(self.repo, self.queue, f"{prefix}{i}.md", "# T\n\nx\n").task_id for i in range(n)]

    def statuses(self, ids):
        return [self.repo.get(i).status for i in ids]

    async def until(self, predicate, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return
            await asyncio.sleep(0.02)
        raise AssertionError("condition not reached in time")


def run(rig: Rig, scenario, stop_grace: float = 0.0):
    """Run the worker and ``scenario(rig)`` on one event loop; stop the worker at the end."""

    async def main():
        worker = asyncio.create_task(rig.worker.run())
        try:
            return await scenario(rig)
        finally:
            rig.worker.stop(stop_grace)
            await asyncio.wait_for(worker, 10)
            rig.calls.close()

    return asyncio.run(main())


def test_runs_concurrency_attempts_at_once_and_finishes_them_all():
    rig = Rig(FakeReviewer(0.1), concurrency=4)
    ids = rig.submit(12)

    async def scenario(rig):
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))

    run(rig, scenario)
    assert rig.reviewer.peak == 4
    # One dispatcher claims only for free slots: never more than the concurrency, never per slot.
    assert max(rig.queue.claims) == 4 and sum(rig.queue.claims) < 12 * 4


def test_idle_worker_waits_in_one_blocking_call_whatever_its_concurrency():
    counts = {}
    for concurrency in (1, 64):
        rig = Rig(FakeReviewer(), concurrency=concurrency, idle_wait=0.1)

        async def idle(rig):
            await asyncio.sleep(1.0)

        run(rig, idle)
        counts[concurrency] = (len(rig.queue.claims), rig.queue.stages)
    # About 1 s / 0.1 s waits each, the same with 64 slots as with one.
    assert all(5 <= n <= 15 for pair in counts.values() for n in pair), counts
    assert abs(counts[64][1] - counts[1][1]) <= 3, counts


def test_heartbeats_renew_every_lease_of_the_process_in_one_call():
    rig = Rig(FakeReviewer(1.0), lease=0.3, concurrency=4)
    ids = rig.submit(4)
    reaper = Reaper(rig.queue, rig.repo, rig.retry, events=rig.events)

    async def scenario(rig):
        while not all(s is TaskStatus.success for s in rig.statuses(ids)):
            reaper.reap_once()  # a busy reaper beside it must never reclaim a heartbeating attempt
            await asyncio.sleep(0.02)

    run(rig, scenario)
    assert [rig.repo.get(i).attempt for i in ids] == [1, 1, 1, 1]
    assert ev.RECLAIMED not in rig.events.names()
    assert 4 in rig.queue.extends  # all four leases in one round trip
    assert len(rig.queue.extends) < 4 * 1.0 / 0.1  # one call per beat (lease/3 = 0.1 s), not one per attempt


def test_a_lost_lease_stops_the_review_commits_nothing_and_hands_the_row_back():
    rig = Rig(FakeReviewer(1.0), lease=0.3)
    [tid] = rig.submit()

    async def scenario(rig):
        await rig.until(lambda: rig.queue.in_flight(1) and rig.repo.get(tid).status is TaskStatus.processing)
        rig.queue.ack(rig.queue.in_flight(1)[0].token)  # the lease is taken away (as Redis losing it)
        await rig.until(lambda: ev.LEASE_LOST in rig.events.names())
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.success)

    run(rig, scenario)
    assert rig.reviewer.cancelled == 1  # the first review was cancelled at once (I11)
    row = rig.repo.get(tid)
    assert row.attempt == 2 and row.retry_count == 0  # handed back uncharged, then done by attempt 2
    succeeded = [f for name, f in rig.events.events if name == ev.SUCCEEDED]
    assert [f["attempt"] for f in succeeded] == [2]


def test_a_heartbeat_that_crosses_the_attempts_own_commit_is_not_a_lost_lease():
    # The commit acks the lease; a heartbeat sent before the ack and answered after it finds the
    # lease gone. That is the attempt's own doing, not a loss (seen once in the failover e2e).
    rig = Rig(FakeReviewer(0.2), lease=0.3)
    finish = rig.proc.finish

    def slow_finish(attempt, outcome):
        done = finish(attempt, outcome)
        time.sleep(0.3)  # heartbeats (every 0.1 s) now find the lease acked
        return done

    rig.proc.finish = slow_finish
    [tid] = rig.submit()

    async def scenario(rig):
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.success)
        await asyncio.sleep(0.4)

    run(rig, scenario)
    assert ev.LEASE_LOST not in rig.events.names() and ev.ABANDONED not in rig.events.names()
    assert [name for name in rig.events.names() if name == ev.SUCCEEDED] == [ev.SUCCEEDED]


def test_an_attempt_past_the_maximum_runtime_is_cancelled_and_retried():
    rig = Rig(FakeReviewer(2.0), lease=0.3, max_runtime=0.3)
    [tid] = rig.submit()

    async def scenario(rig):
        await rig.until(lambda: rig.repo.get(tid).retry_count >= 1)

    run(rig, scenario)
    assert "PROCESSING_TIMEOUT_SECONDS" in rig.repo.get(tid).error
    assert rig.reviewer.cancelled >= 1 and rig.reviewer.completed == 0


def test_shutdown_releases_unfinished_attempts_to_ready_at_the_grace_deadline():
    rig = Rig(FakeReviewer(5.0), lease=0.3)
    [tid] = rig.submit()

    async def scenario(rig):
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.processing)
        return time.monotonic()

    started = run(rig, scenario, stop_grace=0.3)
    assert time.monotonic() - started < 2.0
    row = rig.repo.get(tid)
    assert row.status is TaskStatus.pending and row.retry_count == 0
    assert rig.queue.stats().ready == 1 and rig.queue.stats().processing == 0
    assert rig.reviewer.cancelled == 1


def test_shutdown_lets_a_short_attempt_finish_within_the_grace_period():
    rig = Rig(FakeReviewer(0.3), lease=0.3)
    [tid] = rig.submit()

    async def scenario(rig):
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.processing)

    run(rig, scenario, stop_grace=5.0)
    assert rig.repo.get(tid).status is TaskStatus.success


def test_a_configuration_error_stops_claiming_without_failing_tasks():
    rig = Rig(FakeReviewer(0.0), concurrency=2)
    rig.reviewer.broken = True
    ids = rig.submit(3)

    async def scenario(rig):
        await rig.until(lambda: not rig.gate.open)
        await asyncio.sleep(0.5)
        rows = [rig.repo.get(i) for i in ids]
        assert all(r.status is TaskStatus.pending and r.retry_count == 0 for r in rows)
        assert rig.events.names().count(ev.STARTED) <= 2  # stopped claiming after the first errors
        rig.reviewer.broken = False  # the operator fixes the key
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))

    run(rig, scenario)


def test_a_configuration_error_of_one_document_is_charged_to_it_not_looped():  # issue 13 item 4
    rig = Rig(FakeReviewer(0.0), concurrency=1)
    [refused] = rig.submit(1, prefix="filtered")
    rig.reviewer.refused.add("filtered0.md")
    others = rig.submit(3)
    reaper = Reaper(rig.queue, rig.repo, rig.retry)

    async def scenario(rig):
        end = time.monotonic() + 10
        while not all(s.terminal for s in rig.statuses([refused, *others])) and time.monotonic() < end:
            reaper.reap_once()  # moves the delayed retries back to ready
            await asyncio.sleep(0.02)

    run(rig, scenario)
    row = rig.repo.get(refused)
    assert row.status is TaskStatus.failed and row.attempt == 3 and "refused this document" in row.error
    assert rig.statuses(others) == [TaskStatus.success] * 3 and rig.gate.open


def test_an_unexpected_error_while_claiming_does_not_stop_the_dispatcher():
    rig = Rig(FakeReviewer(0.0))
    [tid] = rig.submit()
    real, failures = rig.queue.claim_batch, [RuntimeError("a bug in a claim")]

    def claim_batch(holder, lease_ms, limit):
        if failures:
            raise failures.pop()
        return real(holder, lease_ms, limit)

    rig.queue.claim_batch = claim_batch

    async def scenario(rig):
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.success)

    run(rig, scenario)
