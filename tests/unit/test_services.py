"""The domain services, defect by defect (ARCHITECTURE.md, Defects), over the in-memory adapters."""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass

import pytest

from docllm.domain import events as ev
from docllm.domain.errors import PermanentError, TransientError, Unavailable
from docllm.domain.events import RecordingEvents
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.outcome import Outcome, Reason
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.policies import LeasePolicy, Limits, RetryPolicy
from docllm.domain.tasks.producer import retry_dead, submit
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from docllm.domain.tasks.verdict import Happened
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

LEASE = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)


class Reviewer:
    name = "stub"

    def __init__(self, *failures: BaseException):
        self.failures = list(failures)
        self.calls = 0

    async def review(self, task_name, document):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"findings": [], "summary": f"reviewed {task_name}", "reviewer": "offline"}

    async def check(self):
        pass


@dataclass
class World:
    clock: ManualClock
    queue: InMemoryTaskQueue
    repo: InMemoryTaskRepository
    events: RecordingEvents
    retry: RetryPolicy

    def worker(self, name="w1", reviewer=None, limits=Limits()):
        return TaskProcessor(
            self.queue, self.repo, reviewer or Reviewer(), self.clock, self.retry, LEASE, name, limits, self.events
        )

    def reaper(self):
        return Reaper(self.queue, self.repo, self.retry, events=self.events)

    def submit(self, document="# T\n\ntext\n"):
        return submit(self.repo, self.queue, "doc.md", document)

    def run_one(self, proc):
        attempt = proc.begin(proc.claim())
        return attempt, proc.finish(attempt, asyncio.run(proc.review(attempt)))

    def expire(self):
        self.clock.advance(LEASE.lease_ms + 1)

    def drain_delayed(self):
        self.clock.advance(self.retry.cap_seconds * 1000 + 1)

    def status(self, task_id):
        return self.repo.get(task_id).status


@pytest.fixture
def w():
    clock = ManualClock()
    tokens = itertools.count(1)
    return World(
        clock,
        InMemoryTaskQueue(clock, token_factory=lambda: f"t{next(tokens)}"),
        InMemoryTaskRepository(clock),
        RecordingEvents(),
        RetryPolicy(max_attempts=3, base_seconds=1, cap_seconds=4, rng=random.Random(0)),
    )


def test_happy_path_commits_once_and_empties_the_queue(w):
    task = w.submit()
    attempt, ok = w.run_one(w.worker())
    assert ok and attempt.number == 1
    row = w.repo.get(task.task_id)
    assert row.status is TaskStatus.success and row.result["summary"] == "reviewed doc.md"
    s = w.queue.stats()
    assert (s.ready, s.processing, s.delayed, s.dead) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "raw, text, reason",
    [
        ("garbage", "malformed payload", Reason.malformed_payload),
        ('{"task_id": 424242}', "unknown task", Reason.unknown_task),
    ],
)
def test_bad_payloads_are_dead_lettered_with_a_reason_never_dropped(w, raw, text, reason):  # D7, I7
    w.queue.push(raw)
    proc = w.worker()
    assert proc.begin(proc.claim()) is None
    [letter] = w.queue.dead_letters()
    assert letter.raw == raw and text in letter.reason
    assert [f["reason"] for n, f in w.events.events if n == ev.DEAD_LETTERED] == [reason]
    assert w.queue.stats().processing == 0


def test_crash_after_claim_before_start_is_requeued_by_the_reaper(w):  # D1/D2
    task = w.submit()
    w.worker("dead").claim()  # the worker dies here: the row still says pending
    w.expire()
    assert w.reaper().reap_once() == 1
    assert w.status(task.task_id) is TaskStatus.pending
    _, ok = w.run_one(w.worker("w2"))
    assert ok and w.status(task.task_id) is TaskStatus.success


def test_a_worker_that_stalled_past_its_lease_before_starting_leaves_no_orphan(w):  # issue 13, item 1a
    task = w.submit()
    stalled = w.worker("stalled")
    delivery = stalled.claim()  # ... and the worker stalls here (GC, SIGSTOP, a row lock)
    w.expire()
    assert w.reaper().reap_once() == 1  # the row is still pending: the payload goes back to ready
    assert stalled.begin(delivery) is not None  # it wakes and starts, under a lease that is gone
    attempt, ok = w.run_one(w.worker("w2"))  # the next claimer finds the row busy under no lease
    assert attempt is not None and attempt.number == 2 and ok
    row = w.repo.get(task.task_id)
    assert row.status is TaskStatus.success and row.retry_count == 0  # handed back uncharged
    assert w.queue.stats().processing == 0


def test_a_start_whose_answer_was_lost_and_payload_requeued_leaves_no_orphan(w):  # issue 13, item 1b
    task = w.submit()
    first = w.worker("w1")
    delivery = first.claim()
    w.repo.start_attempt(task.task_id, delivery.token)  # it landed; the answer never came back
    w.queue.requeue(delivery.token, front=True)  # so the runtime handed the payload back
    attempt, ok = w.run_one(w.worker("w2"))
    assert attempt is not None and ok and w.status(task.task_id) is TaskStatus.success


def test_a_lost_start_answer_then_a_claimer_that_dies_leaves_no_orphan(w):  # issue 13, item 1b (sim)
    # Found by the simulation's lost database replies: the reaper took the second claim's lease
    # for an old duplicate of the attempt on the row, acked the only payload, and the row stayed
    # processing until the reconciler's grace.
    task = w.submit()
    delivery = w.worker("w1").claim()
    w.repo.start_attempt(task.task_id, delivery.token)  # it landed; the answer never came back
    w.queue.requeue(delivery.token, front=True)
    w.worker("w2").claim()  # w2 dies before it starts
    w.expire()
    assert w.reaper().reap_once() == 1
    row = w.repo.get(task.task_id)
    assert row.status is TaskStatus.pending and row.retry_count == 0  # handed back uncharged
    attempt, ok = w.run_one(w.worker("w3"))
    assert attempt is not None and ok and w.status(task.task_id) is TaskStatus.success


def test_reaper_crash_between_row_and_queue_is_finished_by_the_next_one(w):  # D2
    task = w.submit()
    proc = w.worker("dead")
    proc.begin(proc.claim())
    w.expire()
    [delivery] = w.queue.expired(10)
    row = w.repo.get(task.task_id)
    assert w.repo.retry(task.task_id, row.attempt, "lease expired")  # first reaper: row written, then it died
    assert w.reaper().reap_once() == 1  # zero rows to reclaim is not a reason to skip
    assert w.queue.stats().ready == 1 and w.status(task.task_id) is TaskStatus.pending


def test_an_exception_in_the_review_is_a_bounded_retry_not_a_stuck_row(w):  # D3
    task = w.submit()
    _, ok = w.run_one(w.worker(reviewer=Reviewer(RuntimeError("boom"))))
    row = w.repo.get(task.task_id)
    assert ok and row.status is TaskStatus.pending and "boom" in row.error and row.retry_count == 1
    assert w.queue.stats().delayed == 1


def test_a_stale_worker_cannot_overwrite_the_newer_attempt(w):  # D5, I4
    task = w.submit()
    slow = w.worker("slow")
    first = slow.begin(slow.claim())
    w.expire()
    w.reaper().reap_once()
    w.drain_delayed()
    second, ok = w.run_one(w.worker("fast"))
    assert ok and second.number == 2
    assert slow.finish(first, Outcome.success({"summary": "stale"})) is False
    assert w.repo.get(task.task_id).result["summary"] == "reviewed doc.md"
    assert w.events.names().count(ev.SUCCEEDED) == 1


def test_a_poison_task_ends_failed_with_its_payload_dead_lettered(w):  # D6, I5
    task = w.submit()
    reviewer = Reviewer(*[TransientError("500")] * 10)
    for _ in range(3):
        w.drain_delayed()
        w.run_one(w.worker(reviewer=reviewer))
    row = w.repo.get(task.task_id)
    assert row.status is TaskStatus.failed and "attempts exhausted (3/3)" in row.error
    assert reviewer.calls == 3
    [letter] = w.queue.dead_letters()
    assert letter.task_id == task.task_id and letter.raw == make_payload(task.task_id, "doc.md")
    reasons = [f["reason"] for n, f in w.events.events if n in (ev.RETRIED, ev.FAILED)]
    assert reasons == [Reason.transient_error, Reason.transient_error, Reason.attempts_exhausted]


def test_a_poison_task_that_always_times_out_is_failed_by_the_reaper(w):  # D6 via lease expiry
    task = w.submit()
    for n in range(3):
        w.drain_delayed()
        proc = w.worker(f"w{n}")
        assert proc.begin(proc.claim()) is not None
        w.expire()
        w.reaper().reap_once()
    assert w.status(task.task_id) is TaskStatus.failed
    assert w.queue.dead_letters()[0].task_id == task.task_id
    reasons = [f["reason"] for n, f in w.events.events if n in (ev.RECLAIMED, ev.DEAD_LETTERED)]
    assert reasons == [Reason.lease_expired, Reason.lease_expired, Reason.attempts_exhausted]


def test_heartbeats_keep_a_long_attempt_and_a_dead_one_is_reclaimed_after_one_lease(w):  # D9, I8
    long_task, dead_task = w.submit(), w.submit()
    live, dead = w.worker("live"), w.worker("dead")
    a = live.begin(live.claim())
    dead.begin(dead.claim())
    for _ in range(10):  # 100 s: more than three leases
        w.clock.advance(LEASE.heartbeat_seconds * 1000)
        assert live.heartbeat(a)
        w.reaper().reap_once()
    assert w.status(long_task.task_id) is TaskStatus.processing
    assert w.repo.get(dead_task.task_id).error.startswith("lease expired")


def test_redis_data_loss_is_recovered_by_the_reconciler(w):  # D10, I3
    pending, processing = w.submit(), w.submit()
    proc = w.worker()
    proc.begin(proc.claim())  # pending stays in ready, the other is in flight
    w.queue = InMemoryTaskQueue(w.clock)  # Redis restarted without its data
    rec = Reconciler(w.queue, w.repo, w.clock, grace_ms=60_000)
    assert rec.reconcile_once() == 0  # first sighting starts the grace period
    w.clock.advance(30_000)
    assert rec.reconcile_once() == 0
    w.clock.advance(30_000)
    assert rec.reconcile_once() == 2
    assert w.status(processing.task_id) is TaskStatus.pending
    for _ in range(2):
        _, ok = w.run_one(w.worker("w2"))
        assert ok
    assert {w.status(t.task_id) for t in (pending, processing)} == {TaskStatus.success}


def test_the_reconciler_leaves_referenced_rows_alone(w):
    w.submit()
    rec = Reconciler(w.queue, w.repo, w.clock, grace_ms=1)
    for _ in range(3):
        w.clock.advance(10)
        assert rec.reconcile_once() == 0
    assert w.queue.stats().ready == 1


def test_release_on_shutdown_goes_back_first_without_costing_an_attempt(w):  # D11
    first, _ = w.submit(), w.submit()
    proc = w.worker()
    attempt = proc.begin(proc.claim())
    assert proc.finish(attempt, proc.ending(attempt, Happened.shutdown))
    assert [f["reason"] for n, f in w.events.events if n == ev.RELEASED] == [Reason.shutdown]
    row = w.repo.get(first.task_id)
    assert row.status is TaskStatus.pending and row.retry_count == 0
    assert w.worker("w2").claim().raw == make_payload(first.task_id, "doc.md")  # next in line


def test_duplicates_are_recognised_and_not_run_again(w):
    task = w.submit()
    w.queue.push(make_payload(task.task_id, "doc.md"))
    proc = w.worker()
    attempt = proc.begin(proc.claim())
    assert proc.begin(proc.claim()) is None  # duplicate while in flight
    proc.finish(attempt, asyncio.run(proc.review(attempt)))
    w.queue.push(make_payload(task.task_id, "doc.md"))
    assert proc.begin(proc.claim()) is None  # duplicate of a finished task
    assert w.events.names().count(ev.STARTED) == 1 and w.events.names().count(ev.DUPLICATE) == 2
    assert w.queue.stats().processing == 0


def test_permanent_errors_and_oversized_documents_fail_at_once(w):
    a = w.submit()
    w.run_one(w.worker(reviewer=Reviewer(PermanentError("not a document"))))
    b = w.submit("x" * 2000)
    w.run_one(w.worker(limits=Limits(max_document_bytes=1000)))
    assert w.repo.get(a.task_id).error == "not a document"
    assert "over the limit" in w.repo.get(b.task_id).error
    assert {w.status(a.task_id), w.status(b.task_id)} == {TaskStatus.failed}
    assert len(w.queue.dead_letters()) == 2
    reasons = [f["reason"] for n, f in w.events.events if n == ev.FAILED]
    assert reasons == [Reason.permanent_error, Reason.invalid_document]


def test_retry_after_is_honoured(w):
    w.submit()
    w.run_one(w.worker(reviewer=Reviewer(TransientError("429", retry_after=3.5))))
    [event] = [f for n, f in w.events.events if n == ev.RETRIED]
    assert event["delay_s"] >= 3.5


def test_a_row_deleted_in_flight_ends_in_the_dead_letter_list(w):
    task = w.submit()
    proc = w.worker()
    attempt = proc.begin(proc.claim())
    w.repo.delete(task.task_id)
    assert proc.finish(attempt, asyncio.run(proc.review(attempt))) is False
    assert "deleted" in w.queue.dead_letters()[0].reason


def test_operator_retry_reopens_with_a_fresh_budget(w):
    task = w.submit()
    w.run_one(w.worker(reviewer=Reviewer(PermanentError("bad"))))
    assert retry_dead(w.repo, w.queue, task.task_id) == [task.task_id]
    assert w.queue.dead_letters() == []
    attempt, ok = w.run_one(w.worker())
    row = w.repo.get(task.task_id)
    assert ok and row.status is TaskStatus.success and attempt.number == 2 and row.retry_count == 0


class FlakyQueue:
    """The queue, but the first ``dead_letter`` fails as if Redis were restarting."""

    def __init__(self, inner):
        self.inner, self.failed = inner, False

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def dead_letter(self, *args, **kwargs):
        if not self.failed:
            self.failed = True
            from docllm.domain.errors import Unavailable

            raise Unavailable("redis is down")
        return self.inner.dead_letter(*args, **kwargs)


def test_a_retried_finish_after_an_outage_still_dead_letters_the_failed_task(w):  # found by sim seed 2114
    from docllm.domain.errors import Unavailable

    task = w.submit()
    proc = w.worker()
    proc.queue = FlakyQueue(w.queue)
    attempt = proc.begin(proc.claim())
    with pytest.raises(Unavailable):
        proc.finish(attempt, Outcome.permanent("unreviewable"))  # the row is failed; Redis refused
    assert proc.finish(attempt, Outcome.permanent("unreviewable"))  # the runtime retries
    assert [d.task_id for d in w.queue.dead_letters()] == [task.task_id]


def test_a_failed_task_whose_lease_redis_lost_is_still_dead_lettered(w):  # found by sim seed 2216
    task = w.submit()
    proc = w.worker()
    attempt = proc.begin(proc.claim())
    w.queue.ack(attempt.token)  # the lease is gone (data loss); nobody will reap it
    assert proc.finish(attempt, Outcome.permanent("unreviewable"))
    assert [d.task_id for d in w.queue.dead_letters()] == [task.task_id]


def test_a_retried_commit_whose_answer_was_lost_is_acknowledged(w):
    w.submit()
    proc = w.worker()
    attempt = proc.begin(proc.claim())
    real = w.repo.write_group

    def lost_answer(writes, starts=()):  # the first try lands, its answer is lost
        w.repo.write_group = real
        real(writes, starts)
        raise Unavailable("the database's answer was lost")

    w.repo.write_group = lost_answer
    with pytest.raises(Unavailable):
        proc.finish(attempt, Outcome.success({"summary": "landed"}))
    assert proc.finish(attempt, Outcome.success({"summary": "landed"}))  # the retry reads its row
    assert w.queue.stats().processing == 0 and ev.STALE not in w.events.names()


def test_a_commit_refused_because_another_writer_landed_the_same_is_not_ours(w):
    """Issue 43 (4): two pollers of one batch write the same success on the same attempt; the one
    whose write was refused did not land it (its spend and its event are the other's)."""
    w.submit()
    proc = w.worker()
    attempt = proc.begin(proc.claim())
    w.repo.commit(attempt.task_id, attempt.number, {"summary": "landed"})  # the other poller's write
    assert not proc.finish(attempt, Outcome.success({"summary": "landed"}))
    assert ev.SUCCEEDED not in w.events.names()


def test_one_lease_that_cannot_be_settled_does_not_block_the_others(w):
    first, second = w.submit(), w.submit()
    for name in ("a", "b"):
        proc = w.worker(name)
        proc.begin(proc.claim())
    w.expire()
    real_get = w.repo.get

    def broken_get(task_id):
        if task_id == first.task_id:
            raise RuntimeError("corrupt row")
        return real_get(task_id)

    w.repo.get = broken_get
    assert w.reaper().reap_once() == 2
    assert w.status(second.task_id) is TaskStatus.pending  # reclaimed despite the first
    assert "could not be settled" in w.queue.dead_letters()[0].reason


# -- issue 13, item 6: a fail written by another actor is not the worker's own ----------------------


def _last_attempt_outlived_by_its_lease(w):
    task = w.repo.create("doc.md", "# T\n\ntext\n", max_attempts=1)
    w.queue.push(make_payload(task.task_id, "doc.md"))
    proc = w.worker(reviewer=Reviewer(PermanentError("the document is unreadable")))
    attempt = proc.begin(proc.claim())
    outcome = asyncio.run(proc.review(attempt))
    w.expire()  # the worker stalls past its lease before it writes its outcome
    return task, proc, attempt, outcome


def test_a_fail_the_reaper_wrote_is_not_credited_to_the_worker(w):
    task, proc, attempt, outcome = _last_attempt_outlived_by_its_lease(w)
    w.reaper().reap_once()  # the last attempt's lease expired: the reaper fails the row, dead-letters
    assert not proc.finish(attempt, outcome)  # the row was failed by the reaper, not by this attempt
    [letter] = w.queue.dead_letters()  # one dead letter, with the reason the row gives
    assert "lease expired" in letter.reason and w.repo.get(task.task_id).error == letter.reason
    assert not any(name == ev.FAILED for name, _ in w.events.events)


def test_a_fail_the_worker_wrote_is_dead_lettered_once_when_the_reaper_settled_its_lease_first(w):
    task, proc, attempt, outcome = _last_attempt_outlived_by_its_lease(w)
    queue_step = w.queue.dead_letter

    def reaper_first(*args, **kwargs):  # the reaper settles the lease between the row write and this
        del w.queue.dead_letter
        w.reaper().reap_once()
        return queue_step(*args, **kwargs)

    w.queue.dead_letter = reaper_first
    assert proc.finish(attempt, outcome)  # the fail is the worker's; the reaper letters it from the row
    [letter] = w.queue.dead_letters()
    assert letter.reason == "the document is unreadable" == w.repo.get(task.task_id).error


# -- issue 13, item 8: costs that grow with the right thing ------------------------------------------


class CountingQueue:
    """The queue, counting the calls that read the whole dead-letter list."""

    def __init__(self, inner):
        self.inner, self.removals = inner, 0

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def remove_dead_letters(self, task_ids):
        self.removals += 1
        return self.inner.remove_dead_letters(task_ids)


def test_retry_all_reads_the_dead_letter_list_once_not_once_per_task(w):
    tasks = [w.repo.create("doc.md", "x", max_attempts=1) for _ in range(30)]
    for task in tasks:
        w.queue.push(make_payload(task.task_id, "doc.md"))
        w.run_one(w.worker(reviewer=Reviewer(PermanentError("bad"))))
    w.queue.dead_letter(None, "junk", "malformed payload")  # stays: it names no task
    counting = CountingQueue(w.queue)
    assert retry_dead(w.repo, counting, None) == [t.task_id for t in tasks]
    assert counting.removals == 1  # was 30: one scan of the whole list per task (quadratic)
    assert [d.raw for d in w.queue.dead_letters()] == ["junk"] and w.queue.stats().ready == 30
    assert {w.status(t.task_id) for t in tasks} == {TaskStatus.pending}


class PagedQueue:
    """The queue, recording what the reconciler and the reaper read of it."""

    def __init__(self, inner, expired_returns_nothing=False):
        self.inner, self.pages, self.full_reads, self.batches = inner, [], 0, []
        self.expired_returns_nothing = expired_returns_nothing

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def referenced_task_ids(self):
        self.full_reads += 1
        return self.inner.referenced_task_ids()

    def referenced_page(self, cursor, limit):
        self.pages.append(limit)
        return self.inner.referenced_page(cursor, limit)

    def expired(self, limit, start=0.0):
        batch = self.inner.expired(limit, start)
        self.batches.append([d.token for d in batch])
        return [] if self.expired_returns_nothing else batch


def test_a_reconciler_cycle_reads_one_page_of_the_structures_not_all_of_them(w):
    for _ in range(5):
        w.submit()
    paged = PagedQueue(w.queue)
    rec = Reconciler(paged, w.repo, w.clock, grace_ms=1, scan_page=500)
    for _ in range(3):
        w.clock.advance(10)
        assert rec.reconcile_once() == 0
    assert paged.full_reads == 0 and paged.pages == [500, 500, 500]  # was: every structure, every cycle


def test_one_reconciler_works_per_cycle_across_the_fleet(w):
    w.submit()
    paged = PagedQueue(w.queue)
    fleet = [Reconciler(paged, w.repo, w.clock, grace_ms=1, lead_ms=3_000, worker_id=f"w{i}") for i in range(4)]
    for _ in range(3):
        for rec in fleet:
            rec.reconcile_once()
        w.clock.advance(1_000)
    assert len(paged.pages) == 3 and paged.full_reads == 0  # one page per cycle, by the leader
    w.clock.advance(3_000)  # the leader stopped: another takes over after the lease
    for rec in fleet[1:]:
        rec.reconcile_once()
    assert len(paged.pages) == 4


def test_the_reconciler_forgets_rows_that_ended(w):
    tasks = [w.submit() for _ in range(5)]
    w.queue = InMemoryTaskQueue(w.clock)  # Redis lost them: every row is a suspect
    rec = Reconciler(w.queue, w.repo, w.clock, grace_ms=60_000)
    rec.reconcile_once()
    assert len(rec._suspects) == 5
    for task in tasks:  # they end another way (an operator deleted them, a late worker finished)
        w.repo.delete(task.task_id)
    rec.reconcile_once()
    assert rec._suspects == {}  # was: kept for ever, one entry per row that ever looked lost


def test_reapers_take_different_batches_of_a_large_backlog(w):
    for _ in range(300):
        w.submit()
    proc = w.worker("crashed")
    for _ in range(300):
        proc.begin(proc.claim())
    w.expire()
    paged = PagedQueue(w.queue, expired_returns_nothing=True)  # both read the same backlog
    for seed in (1, 2):
        Reaper(paged, w.repo, w.retry, batch=100, rng=random.Random(seed)).reap_once()
    first, second = map(set, paged.batches)
    assert len(first) == len(second) == 100 and len(first & second) < 50  # was: the same oldest 100
