"""The event-loop runtime: one dispatcher, batched heartbeats, lost leases, maximum runtime, shutdown,
bad LLM configuration, and cancellation of abandoned reviews (I11). In-memory adapters whose clock is
the loop's, port calls inline, on virtual time (``tests.support.runtime_rig``): no wall-clock wait,
so a loaded machine changes nothing, and timing bounds are exact."""

from __future__ import annotations

import asyncio

import pytest

from docllm.domain import events as ev
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.reaper import Reaper
from tests.support.runtime_rig import FakeReviewer, Rig, run


def test_runs_concurrency_attempts_at_once_and_finishes_them_all():
    rig = Rig(FakeReviewer(0.1), concurrency=4)
    ids = rig.submit(12)

    async def scenario(rig):
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))

    run(rig, scenario)
    assert rig.reviewer.peak == 4
    # One dispatcher claims only for free slots: never more than the concurrency, never per slot.
    assert max(rig.queue.claims) == 4 and sum(rig.queue.claims) < 12 * 4


def test_a_slot_is_free_once_the_review_ends_while_its_end_is_written():
    """Issue 24's bursts: the next claim does not wait for the end's write (a commit queued behind a
    burst's), and at most ``concurrency`` ends are written at once: at most 2 x concurrency claimed."""
    rig = Rig(FakeReviewer(0.1), concurrency=2)
    rig.calls.slow[rig.proc.commit_many] = 1.0  # each group of ends answers a second after it ran
    ids = rig.submit(8)
    seen: dict[str, int] = {"claimed": 0, "reviews_before_first_written": 0}
    tokens: set[str] = set()

    def look() -> None:
        seen["claimed"] = max(seen["claimed"], len(rig.worker.claimed))
        tokens.update(rig.worker.claimed)
        if tokens <= set(rig.worker.claimed):  # no attempt settled yet: no end's write answered
            seen["reviews_before_first_written"] = rig.reviewer.calls

    async def scenario(rig):
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)), each=look)

    run(rig, scenario)
    assert rig.reviewer.peak == 2  # never more reviews at once than the concurrency
    # While the first pair's ends were written (1 s), the second pair was claimed and reviewed.
    assert seen["reviews_before_first_written"] == 4, seen
    assert seen["claimed"] == 4, seen


@pytest.mark.parametrize(
    ("tasks", "start_reply", "first_end_after"),
    [
        (4, 1.0, 1.0),  # the next pair's starts answer 1 s after they ran: the ends wait for them
        (4, 5.0, 2.0),  # at most END_HOLD_SECONDS (2 s), however late the starts answer
        (2, 1.0, 0.0),  # nothing left to claim: nothing to wait for
    ],
)
def test_an_end_waits_while_the_freed_slots_are_refilled(tasks, start_reply, first_end_after):
    """Issue 24's bursts: when C answers arrive together, the next requests' claims and starts go
    before the burst's ends (which would hold the process's one CPU first), within a bound."""
    rig = Rig(FakeReviewer(0.1), lease=30.0, concurrency=2)
    rig.calls.slow[rig.proc.begin_batch] = start_reply
    ends: list[float] = []
    commit_many = rig.proc.commit_many

    def timed_commits(*args):
        ends.append(rig.now())
        return commit_many(*args)

    rig.worker.commits.send = timed_commits
    ids = rig.submit(tasks)

    async def scenario(rig):
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)), timeout=30)

    started = rig.now()
    run(rig, scenario)
    # The first pair's reviews end start_reply + 0.1 s in (plus the ports' 1 ms round trips).
    first_review_end = started + start_reply + 0.1
    assert ends[0] - first_review_end == pytest.approx(first_end_after, abs=0.05), ends


def test_idle_worker_waits_in_one_blocking_call_whatever_its_concurrency():
    counts = {}
    for concurrency in (1, 64):
        rig = Rig(FakeReviewer(), concurrency=concurrency, idle_wait=0.1)

        async def idle(rig):
            await asyncio.sleep(1.0)

        run(rig, idle)
        counts[concurrency] = (len(rig.queue.claims), rig.queue.stages)
    # 1 s / 0.1 s waits each (one claim and one blocking wait per wait), the same with 64 slots as with one.
    assert counts == {1: (10, 10), 64: (10, 10)}, counts


def test_heartbeats_renew_every_lease_of_the_process_in_one_call():
    rig = Rig(FakeReviewer(1.0), lease=0.3, concurrency=4)
    ids = rig.submit(4)
    reaper = Reaper(rig.queue, rig.repo, rig.retry, events=rig.events)

    async def scenario(rig):
        # A busy reaper beside it (a cycle every 20 ms) must never reclaim a heartbeating attempt.
        await rig.until(
            lambda: all(s is TaskStatus.success for s in rig.statuses(ids)), each=reaper.reap_once, every=0.02
        )

    run(rig, scenario)
    assert [rig.repo.get(i).attempt for i in ids] == [1, 1, 1, 1]
    assert ev.RECLAIMED not in rig.events.names()
    # All four leases in each round trip, one call per beat (lease/3 = 0.1 s over the 1 s reviews), not one per attempt.
    assert set(rig.queue.extends) == {4} and len(rig.queue.extends) <= 1.0 / 0.1, rig.queue.extends


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
    rig.calls.slow[rig.proc.commit_many] = 0.3  # its reply comes late: heartbeats (every 0.1 s) find the lease acked
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
        return rig.now()

    started = run(rig, scenario, stop_grace=0.3)
    assert rig.now() - started == pytest.approx(0.3 + rig.calls.latency)  # the grace, then the release's round trip
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
        end = rig.now() + 10
        while not all(s.terminal for s in rig.statuses([refused, *others])) and rig.now() < end:
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

    def claim_batch(worker_id, lease_ms, limit):
        if failures:
            raise failures.pop()
        return real(worker_id, lease_ms, limit)

    rig.queue.claim_batch = claim_batch

    async def scenario(rig):
        await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.success)

    run(rig, scenario)
