"""The TaskQueue contract: one suite, run against every adapter (see conftest.py)."""

from __future__ import annotations

import json
import threading
import time

from docllm.domain.tasks.model import Delivery
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.ports import TaskQueue

from .conftest import QueueUnderTest

LEASE = 30_000


def payload(task_id: int) -> str:
    return make_payload(task_id, f"task {task_id}")


def claim(subject: QueueUnderTest, lease_ms: int = LEASE, worker_id: str = "w1") -> Delivery:
    delivery = subject.queue.claim(worker_id, lease_ms)
    assert delivery is not None
    return delivery


def drain(subject: QueueUnderTest) -> list[str]:
    raws = []
    while (delivery := subject.queue.claim("drain", LEASE)) is not None:
        raws.append(delivery.raw)
    return raws


def test_adapter_has_every_method_of_the_port(subject: QueueUnderTest) -> None:
    roles = [role for role in TaskQueue.__mro__ if role.__module__ == TaskQueue.__module__]  # TaskQueue and its roles
    wanted = {name for role in roles for name in vars(role) if not name.startswith("_")}
    assert len(wanted) == 31
    assert {name for name in wanted if not callable(getattr(subject.queue, name, None))} == set()


# -- claim ----------------------------------------------------------------------------------------


def test_claim_on_empty_returns_none(subject: QueueUnderTest) -> None:
    assert subject.queue.claim("w1", LEASE) is None


def test_claim_is_fifo(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    assert drain(subject) == [payload(1), payload(2), payload(3)]


def test_push_front_is_claimed_next(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    subject.queue.push(payload(2), front=True)
    assert drain(subject) == [payload(2), payload(1)]


def test_plain_lpush_of_an_existing_producer_is_served(subject: QueueUnderTest) -> None:
    subject.lpush('{"task_id": 7, "task_name": "x"}')
    subject.lpush('{"task_id": 8, "task_name": "y"}')
    assert drain(subject) == ['{"task_id": 7, "task_name": "x"}', '{"task_id": 8, "task_name": "y"}']


def test_delivery_carries_the_lease(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    now = subject.clock.now_ms()
    delivery = claim(subject, lease_ms=5_000, worker_id="worker-a")
    assert (delivery.raw, delivery.worker_id) == (payload(1), "worker-a")
    assert (delivery.claimed_at_ms, delivery.deadline_ms) == (now, now + 5_000)
    subject.queue.push(payload(2))
    other = claim(subject)
    assert delivery.token and other.token != delivery.token
    assert subject.queue.now_ms() == now


def test_payload_is_kept_byte_for_byte(subject: QueueUnderTest) -> None:
    raw = '{ "task_name" : "文档/é\\u00e9\\n" ,"task_id":7 }'
    subject.lpush(raw)
    delivery = claim(subject)
    assert delivery.raw == raw
    assert subject.queue.dead_letter(delivery.token, delivery.raw, "why")
    assert subject.queue.dead_letters()[0].raw == raw


def test_malformed_payload_is_leased_and_returned_not_dropped(subject: QueueUnderTest) -> None:
    bad = ["not json {", "[1, 2]", '{"task_id": "abc"}', '{"task_name": "no id"}', '{"task_id": null}']
    for raw in bad:
        subject.lpush(raw)
    deliveries = [claim(subject, lease_ms=1_000) for _ in bad]
    assert [d.raw for d in deliveries] == bad
    assert subject.queue.stats().processing == len(bad)
    subject.clock.advance(1_001)
    assert sorted(d.raw for d in subject.queue.expired(10)) == sorted(bad)  # same deadline: by token
    for delivery in deliveries:
        assert subject.queue.dead_letter(delivery.token, delivery.raw, "malformed payload")
    assert sorted(d.raw for d in subject.queue.dead_letters()) == sorted(bad)
    assert subject.queue.stats().processing == 0


def test_concurrent_claims_never_share_a_payload(subject: QueueUnderTest) -> None:
    for task_id in range(1, 201):
        subject.queue.push(payload(task_id))
    claimed: list[list[str]] = [[] for _ in range(8)]
    workers = [threading.Thread(target=lambda mine: mine.extend(drain(subject)), args=(c,)) for c in claimed]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    everything = [raw for mine in claimed for raw in mine]
    assert sorted(everything) == sorted(payload(task_id) for task_id in range(1, 201))
    assert subject.queue.stats().processing == 200


# -- leases ---------------------------------------------------------------------------------------


def test_lease_is_expired_only_after_its_deadline(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    delivery = claim(subject, lease_ms=1_000)
    subject.clock.advance(1_000)
    assert subject.queue.expired(10) == []
    subject.clock.advance(1)
    assert subject.queue.expired(10) == [delivery]


def test_expired_is_oldest_first_and_limited(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    late = claim(subject, lease_ms=3_000)
    early = claim(subject, lease_ms=1_000)
    alive = claim(subject, lease_ms=60_000)
    subject.clock.advance(5_000)
    assert [d.token for d in subject.queue.expired(10)] == [early.token, late.token]
    assert [d.token for d in subject.queue.expired(1)] == [early.token]
    assert alive.token not in {d.token for d in subject.queue.expired(10)}


def test_extend_moves_the_deadline(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    delivery = claim(subject, lease_ms=1_000)
    subject.clock.advance(900)
    assert subject.queue.extend(delivery.token, 1_000)
    subject.clock.advance(900)
    assert subject.queue.expired(10) == []
    subject.clock.advance(101)
    assert [d.deadline_ms for d in subject.queue.expired(10)] == [delivery.claimed_at_ms + 1_900]


def test_an_expired_lease_is_not_renewed_but_still_held_for_the_reaper(subject: QueueUnderTest) -> None:
    # A reaper may be acting on what it read of an expired lease: a late heartbeat must not revive it.
    subject.queue.push(payload(1))
    delivery = claim(subject, lease_ms=1_000)
    subject.clock.advance(5_000)
    assert not subject.queue.extend(delivery.token, 1_000)
    assert [d.token for d in subject.queue.expired(10)] == [delivery.token]
    assert subject.queue.lease_exists(delivery.token)
    assert subject.queue.requeue(delivery.token)
    assert not subject.queue.lease_exists(delivery.token)


def test_extend_many_renews_each_live_lease_in_order(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    a, b, c = subject.queue.claim_batch("w1", 1_000, 3)
    subject.queue.ack(b.token)
    subject.clock.advance(500)
    assert subject.queue.extend_many([a.token, b.token, c.token, "nope"], 1_000) == [True, False, True, False]
    subject.clock.advance(900)  # past the first deadline, not the renewed one
    assert subject.queue.expired(10) == []
    assert subject.queue.extend_many([], 1_000) == []


def test_claim_batch_takes_up_to_limit_in_fifo_order(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    batch = subject.queue.claim_batch("w1", LEASE, 2)
    assert [d.raw for d in batch] == [payload(1), payload(2)]
    assert len({d.token for d in batch}) == 2
    assert [d.raw for d in subject.queue.claim_batch("w1", LEASE, 5)] == [payload(3)]
    assert subject.queue.claim_batch("w1", LEASE, 5) == []
    assert subject.queue.stats().processing == 3


def test_a_staged_payload_is_leased_by_its_claimer(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    raw = subject.queue.stage(0)
    assert raw == payload(1) and subject.queue.claim("other", LEASE) is None  # nobody else takes it
    assert subject.queue.referenced_task_ids() == {1}
    delivery = subject.queue.lease_staged(raw, "w1", LEASE)
    assert delivery is not None and delivery.raw == raw and subject.queue.lease_exists(delivery.token)
    assert subject.queue.lease_staged(raw, "w1", LEASE) is None  # once
    assert subject.queue.stage(0) is None


def test_unstage_returns_what_a_dead_claimer_left_after_the_grace(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    subject.queue.push(payload(2))
    raw = subject.queue.stage(0)  # ... and the claimer dies here (D1)
    assert raw is not None
    assert subject.queue.unstage(1_000, 100) == 0  # first seen now
    subject.clock.advance(500)
    assert subject.queue.unstage(1_000, 100) == 0
    subject.clock.advance(600)
    assert subject.queue.unstage(1_000, 100) == 1
    assert subject.queue.lease_staged(raw, "w1", LEASE) is None  # too late: it went back
    assert drain(subject) == [payload(1), payload(2)]  # at the front, where it was


def test_extend_with_a_wrong_or_ended_token_is_false(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    delivery = claim(subject, lease_ms=1_000)
    assert not subject.queue.extend("not-a-token", 1_000)
    subject.clock.advance(2_000)
    assert subject.queue.ack(delivery.token)
    assert not subject.queue.extend(delivery.token, 1_000)
    assert subject.queue.expired(10) == []


def test_ack_twice_the_second_is_false(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    delivery = claim(subject)
    assert subject.queue.ack(delivery.token)
    assert not subject.queue.ack(delivery.token)
    assert subject.queue.stats().processing == 0
    assert subject.queue.referenced_task_ids() == set()


def test_ack_many_ends_each_lease_as_if_alone(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    first, second, third = claim(subject), claim(subject), claim(subject)
    assert subject.queue.ack(second.token)
    assert subject.queue.ack_many([first.token, second.token, "not-a-token", third.token]) == [True, False, False, True]
    assert subject.queue.ack_many([]) == []
    assert subject.queue.stats().processing == 0
    assert subject.queue.in_flight(10) == []
    assert subject.queue.referenced_task_ids() == set()


def test_a_taken_lease_refuses_every_later_call(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    stale = claim(subject)
    assert subject.queue.requeue(stale.token)  # e.g. the reaper
    fresh = claim(subject)
    assert fresh.raw == stale.raw
    queue = subject.queue
    assert not queue.extend(stale.token, LEASE)
    assert not queue.retry_later(stale.token, 1_000)
    assert not queue.requeue(stale.token)
    assert not queue.dead_letter(stale.token, stale.raw, "late")
    assert not queue.ack(stale.token)
    assert queue.stats().processing == 1 and queue.stats().delayed == 0 and queue.dead_letters() == []
    assert queue.ack(fresh.token)


def test_in_flight_lists_current_leases_oldest_claim_first(subject: QueueUnderTest) -> None:
    assert subject.queue.in_flight(10) == []
    for task_id in (1, 2, 3, 4):
        subject.queue.push(payload(task_id))
    deliveries: list[Delivery] = []
    for _ in range(4):
        deliveries.append(claim(subject, lease_ms=10_000 - 1_000 * len(deliveries)))
        subject.clock.advance(100)
    subject.queue.ack(deliveries[1].token)
    subject.queue.extend(deliveries[0].token, 50_000)
    first, third, fourth = deliveries[0], deliveries[2], deliveries[3]
    extended = Delivery(first.raw, first.token, subject.clock.now_ms() + 50_000, first.worker_id, first.claimed_at_ms)
    assert subject.queue.in_flight(10) == [extended, third, fourth]
    assert subject.queue.in_flight(2) == [extended, third]


# -- retries and requeues -------------------------------------------------------------------------


def test_retry_later_is_due_only_after_the_delay(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    delivery = claim(subject)
    assert subject.queue.retry_later(delivery.token, 2_000)
    assert subject.queue.stats().delayed == 1 and subject.queue.stats().processing == 0
    subject.clock.advance(1_999)
    assert subject.queue.claim("w1", LEASE) is None
    assert subject.queue.promote_due(10) == 0
    subject.clock.advance(1)
    assert claim(subject).raw == payload(1)
    assert subject.queue.stats().delayed == 0


def test_promote_due_moves_due_payloads_behind_the_ready_ones(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    first, second = claim(subject), claim(subject)
    subject.queue.retry_later(second.token, 200)
    subject.queue.retry_later(first.token, 100)
    subject.clock.advance(500)
    assert subject.queue.promote_due(1) == 1
    assert subject.queue.promote_due(10) == 1
    assert subject.queue.stats().ready == 3
    assert drain(subject) == [payload(3), payload(1), payload(2)]


def test_requeue_front_and_back(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    first, second = claim(subject), claim(subject)
    assert subject.queue.requeue(first.token)  # back: behind 3
    assert subject.queue.requeue(second.token, front=True)  # front: claimed next
    assert drain(subject) == [payload(2), payload(3), payload(1)]


# -- dead letters ---------------------------------------------------------------------------------


def test_dead_letter_keeps_payload_reason_and_task(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    delivery = claim(subject)
    subject.clock.advance(10)
    assert subject.queue.dead_letter(delivery.token, delivery.raw, "attempts exhausted")
    [letter] = subject.queue.dead_letters()
    assert (letter.raw, letter.reason, letter.task_id) == (payload(1), "attempts exhausted", 1)
    assert letter.at_ms == subject.clock.now_ms()
    assert subject.queue.stats().processing == 0


def test_dead_letter_without_a_token_just_records(subject: QueueUnderTest) -> None:
    assert subject.queue.dead_letter(None, "junk", "unknown task")
    assert subject.queue.dead_letter(None, payload(9), "task row missing", task_id=9)
    assert [(d.raw, d.reason, d.task_id) for d in subject.queue.dead_letters()] == [
        (payload(9), "task row missing", 9),
        ("junk", "unknown task", None),
    ]


def test_a_dead_letter_unless_lettered_is_not_added_twice_for_a_task(subject: QueueUnderTest) -> None:
    assert subject.queue.dead_letter(None, "junk", "malformed")  # names no task: never a match
    assert subject.queue.dead_letter(None, payload(9), "reaper: lease expired", task_id=9)
    assert not subject.queue.dead_letter(None, payload(9), "worker's reason", task_id=9, unless_lettered=True)
    assert subject.queue.dead_letter(None, payload(8), "worker's reason", task_id=8, unless_lettered=True)
    assert [(d.task_id, d.reason) for d in subject.queue.dead_letters()] == [
        (8, "worker's reason"),
        (9, "reaper: lease expired"),
        (None, "malformed"),
    ]


def test_dead_letters_newest_first_limited_and_removable(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 1, 3):
        subject.queue.dead_letter(None, payload(task_id), f"reason {task_id}", task_id=task_id)
    assert [d.task_id for d in subject.queue.dead_letters(limit=2)] == [3, 1]
    assert [d.task_id for d in subject.queue.remove_dead_letters([1])] == [1, 1]
    assert [d.task_id for d in subject.queue.dead_letters()] == [3, 2]
    assert subject.queue.remove_dead_letters([42]) == [] and subject.queue.remove_dead_letters([]) == []
    for task_id in (4, 5, 6):
        subject.queue.dead_letter(None, payload(task_id), f"reason {task_id}", task_id=task_id)
    subject.queue.dead_letter(None, "junk", "malformed")
    assert [d.task_id for d in subject.queue.remove_dead_letters([6, 2, 4])] == [6, 4, 2]  # one call
    assert [d.task_id for d in subject.queue.dead_letters()] == [None, 5, 3]  # order kept
    assert [d.task_id for d in subject.queue.remove_dead_letters(None)] == [None, 5, 3]
    assert subject.queue.dead_letters() == [] and subject.queue.stats().dead == 0


# -- what the reconciler and operators read -------------------------------------------------------


def test_referenced_task_ids_covers_ready_delayed_and_leased(subject: QueueUnderTest) -> None:
    for task_id in range(1, 8):
        subject.queue.push(payload(task_id))
    subject.lpush("not json")
    subject.lpush(json.dumps({"task_id": "8"}))
    leased, delayed, acked, dead = (claim(subject) for _ in range(4))
    subject.queue.retry_later(delayed.token, 60_000)
    subject.queue.ack(acked.token)
    subject.queue.dead_letter(dead.token, dead.raw, "poison")
    assert leased.raw == payload(1)
    assert subject.queue.referenced_task_ids() == {1, 2, 5, 6, 7, 8}
    named: set[int] = set()
    cursor, pages = None, 0
    while True:  # a lap in bounded pages names the same
        found, cursor = subject.queue.referenced_page(cursor, 2)
        named, pages = named | found, pages + 1
        if cursor is None:
            break
    assert named == {1, 2, 5, 6, 7, 8} and pages < 20


def test_the_fleets_lease_on_a_role_has_one_holder_at_a_time(subject: QueueUnderTest) -> None:
    assert subject.queue.lead("reconciler", "a", 1_000)
    assert not subject.queue.lead("reconciler", "b", 1_000)
    assert subject.queue.lead("other role", "b", 1_000)
    subject.clock.advance(900)
    assert subject.queue.lead("reconciler", "a", 1_000)  # renewed: until 1 900
    subject.clock.advance(900)
    assert not subject.queue.lead("reconciler", "b", 1_000)
    subject.clock.advance(101)
    assert subject.queue.lead("reconciler", "b", 1_000)  # a stopped renewing: b takes over
    assert not subject.queue.lead("reconciler", "a", 1_000)


def test_expired_from_a_start_point_in_the_backlog(subject: QueueUnderTest) -> None:
    for task_id in range(1, 11):
        subject.queue.push(payload(task_id))
    leases = []
    for _ in range(10):
        leases.append(claim(subject, lease_ms=1_000))
        subject.clock.advance(1)  # deadlines in claim order
    subject.clock.advance(1_000)
    tokens = [d.token for d in leases]
    assert [d.token for d in subject.queue.expired(3)] == tokens[:3]  # the oldest
    assert [d.token for d in subject.queue.expired(3, start=0.5)] == tokens[3:6]  # 0.5 of the other 7
    assert [d.token for d in subject.queue.expired(3, start=0.99)] == tokens[6:9]
    assert [d.token for d in subject.queue.expired(20, start=0.7)] == tokens  # no more than a batch: all


def test_stats(subject: QueueUnderTest) -> None:
    assert subject.queue.stats().oldest_claimed_at_ms is None
    for task_id in range(1, 6):
        subject.queue.push(payload(task_id))
    first_claim = subject.clock.now_ms()
    first = claim(subject)
    subject.clock.advance(2_000)
    claim(subject)
    retried = claim(subject)
    subject.queue.retry_later(retried.token, 10_000)
    subject.queue.dead_letter(None, "junk", "bad")
    stats = subject.queue.stats()
    assert (stats.ready, stats.processing, stats.delayed, stats.dead) == (2, 2, 1, 1)
    assert stats.oldest_claimed_at_ms == first_claim
    subject.queue.ack(first.token)
    assert subject.queue.stats().oldest_claimed_at_ms == first_claim + 2_000


# -- blocking wait --------------------------------------------------------------------------------


def test_stage_returns_promptly_when_a_payload_arrives(blocking_subject: QueueUnderTest) -> None:
    subject = blocking_subject
    pusher = threading.Timer(0.2, subject.queue.push, args=(payload(1),))
    started = time.monotonic()
    pusher.start()
    raw = subject.queue.stage(5.0)
    elapsed = time.monotonic() - started
    pusher.join()
    assert 0.15 < elapsed < 2.0 and raw == payload(1)
    delivery = subject.queue.lease_staged(raw, "w1", LEASE)
    assert delivery is not None and subject.queue.stats().processing == 1


def test_stage_returns_at_once_when_ready_is_not_empty(subject: QueueUnderTest) -> None:
    subject.queue.push(payload(1))
    started = time.monotonic()
    assert subject.queue.stage(5.0) == payload(1)
    assert time.monotonic() - started < 1.0


def test_stage_times_out_when_nothing_comes(blocking_subject: QueueUnderTest) -> None:
    subject = blocking_subject
    # 0.8 s is longer than the real-server client's socket timeout (0.5 s, see conftest.py).
    started = time.monotonic()
    assert subject.queue.stage(0.8) is None
    assert 0.7 < time.monotonic() - started < 3.0


def test_one_push_wakes_one_blocked_claimer(blocking_subject: QueueUnderTest) -> None:
    subject = blocking_subject
    got: list[str | None] = []
    # 4 s: the push below lands long before the waits end, however late a busy machine runs it.
    waiters = [threading.Thread(target=lambda: got.append(subject.queue.stage(4.0))) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.3)  # all three are blocked now
    subject.queue.push(payload(1))
    for waiter in waiters:
        waiter.join()
    assert sorted(got, key=str) == [None, None, payload(1)]


def test_clamp_brings_deadlines_a_backward_clock_step_pushed_out_back_in(subject: QueueUnderTest) -> None:
    # ARCHITECTURE.md, Clocks: the authority's clock stepped back an hour after these were written.
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    crashed, live, _ = subject.queue.claim_batch("w1", 1_000, 3)
    subject.queue.retry_later(live.token, 10_000)
    subject.clock.advance(-3_600_000)
    assert subject.queue.expired(10) == []  # an hour away, seen from the new clock
    assert subject.queue.clamp(1_000, 20_000, 100) == 3  # two leases, one retry
    assert subject.queue.clamp(1_000, 20_000, 100) == 0  # nothing more to move
    subject.clock.advance(1_001)
    assert {d.token for d in subject.queue.expired(10)} >= {crashed.token}
    subject.clock.advance(20_000)
    assert subject.queue.promote_due(10) == 1  # the retry is due within its longest delay


def test_after_a_forward_clock_step_no_lease_is_reclaimed_for_a_lease_and_live_ones_renew(
    subject: QueueUnderTest,
) -> None:
    # ARCHITECTURE.md, Clocks: the authority's clock jumps an hour ahead. One worker heartbeats (it held
    # its lease until the step), one lease had lapsed before the step, one worker died.
    for task_id in (1, 2, 3):
        subject.queue.push(payload(task_id))
    lapsed = claim(subject, 1_000)
    subject.clock.advance(1_500)
    live, dead = subject.queue.claim_batch("w1", 1_000, 2)
    before = subject.queue.now_ms()
    subject.clock.advance(3_600_000)
    subject.queue.note_clock_step(subject.queue.now_ms(), before, 0, 1_000)
    assert subject.queue.expired(10) == []  # quiet: everything looks expired on the new clock
    assert subject.queue.extend_many([live.token, lapsed.token], 1_000) == [True, False]
    subject.clock.advance(700)
    assert subject.queue.extend_many([live.token], 1_000) == [True]  # its next beat, on the new clock
    subject.clock.advance(634)  # the quiet window (a lease and a third) is over
    assert subject.queue.extend_many([dead.token], 1_000) == [False]  # too late: it stays lost
    assert {d.token for d in subject.queue.expired(10)} == {lapsed.token, dead.token}
    assert subject.queue.lease_exists(live.token)


def test_a_process_still_on_the_old_clock_does_not_reclaim_after_a_step(subject: QueueUnderTest) -> None:
    # One process saw the clock step back an hour and renewed a lease on the new clock; another
    # has not re-read TIME yet and still counts on the old clock, an hour ahead.
    subject.queue.push(payload(1))
    renewed_late = claim(subject, 1_000)
    old = subject.queue.now_ms()
    subject.clock.advance(-3_600_000)
    subject.queue.note_clock_step(subject.queue.now_ms(), old, 0, 1_000)
    assert subject.queue.extend_many([renewed_late.token], 1_000) == [True]
    subject.clock.advance(3_600_000)  # the old clock's view: that deadline is an hour ago
    assert subject.queue.expired(10) == []
    subject.clock.advance(1_334)  # after the window, the lease is expired on any clock
    assert [d.token for d in subject.queue.expired(10)] == [renewed_late.token]


# -- cancel marks (docllm cancel) -----------------------------------------------------------------


def test_cancel_marks_are_set_read_and_cleared_by_task_id(subject: QueueUnderTest) -> None:
    q = subject.queue
    assert q.cancel_marks([1, 2, 3]) == set()
    q.mark_cancelled([1, 3])
    q.mark_cancelled([3])
    q.mark_cancelled([])
    assert q.cancel_marks([1, 2, 3, 4]) == {1, 3}
    assert q.cancel_marks([]) == set()
    q.clear_cancelled([1, 5])
    q.clear_cancelled([])
    assert q.cancel_marks([1, 2, 3]) == {3}


def test_a_claim_says_whether_its_task_was_cancelled(subject: QueueUnderTest) -> None:
    q = subject.queue
    for task_id in (1, 2, 3):
        q.push(payload(task_id))
    q.push("not json")
    q.mark_cancelled([2])
    claimed = q.claim_batch("w1", LEASE, 3)
    assert [(d.raw, d.cancelled) for d in claimed] == [(payload(1), False), (payload(2), True), (payload(3), False)]
    assert q.stage(0) == "not json" and staged(q, "not json") is False
    q.clear_cancelled([2])
    q.push(payload(2))
    q.mark_cancelled([7])
    assert q.stage(0) == payload(2) and staged(q, payload(2)) is False
    q.push(payload(7))
    assert q.stage(0) == payload(7) and staged(q, payload(7)) is True


def staged(q: TaskQueue, raw: str) -> bool:
    """Lease a staged payload; whether its delivery says cancelled."""
    delivery = q.lease_staged(raw, "w1", LEASE)
    assert delivery is not None
    return delivery.cancelled
