"""The TaskQueue contract for what the original note's workers leave in Redis (ARCHITECTURE.md, Switching over):
``leftovers`` finds it, ``release_leftovers`` puts it back to work, and neither touches a lease."""

from __future__ import annotations

import json
from collections import Counter

from docllm.domain.tasks.model import Delivery, Leftovers
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.ports import TaskQueue

from .conftest import QueueUnderTest

LEASE = 30_000


def claimed(queue: TaskQueue) -> Delivery:
    """A claim the test expects to find a payload."""
    delivery = queue.claim("w", LEASE)
    assert delivery is not None
    return delivery


def payload(task_id: int) -> str:
    return make_payload(task_id, f"任务 {task_id}")  # as the original producer writes it: ensure_ascii=False


def test_a_queue_used_only_by_docllm_has_no_leftovers(subject: QueueUnderTest) -> None:
    q = subject.queue
    for task_id in (1, 2, 3):
        q.push(payload(task_id))
    first, second = claimed(q), claimed(q)
    assert q.leftovers(100) == Leftovers()
    assert q.ack(first.token) and q.requeue(second.token)
    assert q.leftovers(100) == Leftovers()


def test_payloads_the_original_workers_took_are_leftovers_with_their_stamps(subject: QueueUnderTest) -> None:
    for task_id in (1, 2, 3, 4):
        subject.lpush(payload(task_id))
    assert subject.original_take("1700000001") == payload(1)  # crashed while processing (D3)
    assert subject.original_take(None) == payload(2)  # crashed before its HSET (D1)
    subject.original_stamp(9, "1700000009")  # crashed between its LREM and its HDEL
    delivery = subject.queue.claim("w", LEASE)  # docllm's own lease is not a leftover
    assert delivery is not None and delivery.raw == payload(3)
    found = subject.queue.leftovers(100)
    assert Counter(found.payloads) == Counter([payload(1), payload(2)])
    assert found.stamps == ((1, "1700000001"), (9, "1700000009"))


def test_leftovers_respects_its_limit(subject: QueueUnderTest) -> None:
    for task_id in range(1, 6):
        subject.lpush(payload(task_id))
        subject.original_take(str(task_id))
    found = subject.queue.leftovers(2)
    assert (len(found.payloads), len(found.stamps)) == (2, 2)


def test_a_stamp_of_a_task_a_lease_names_is_not_a_leftover(subject: QueueUnderTest) -> None:
    subject.original_stamp(1, "1700000001")
    subject.queue.push(payload(1))
    delivery = claimed(subject.queue)
    assert subject.queue.leftovers(100) == Leftovers()
    assert subject.queue.ack(delivery.token)
    assert subject.queue.leftovers(100) == Leftovers()  # the claim's stamp went with its lease


def test_only_the_extra_copy_of_a_leased_payload_is_a_leftover(subject: QueueUnderTest) -> None:
    subject.lpush(payload(1))
    subject.original_take(None)
    subject.lpush(payload(1))  # the reconciler (or the producer) pushed it again
    delivery = claimed(subject.queue)
    seen_at = subject.clock.now_ms()
    assert subject.queue.leftovers(100).payloads == (payload(1),)
    # Claimed in the second of the sighting: the copies cannot be told apart, so both stay.
    assert subject.queue.release_leftovers([payload(1)], [], seen_at) == 0
    subject.clock.advance(1000)
    seen_at = subject.clock.now_ms()
    assert subject.queue.leftovers(100).payloads == (payload(1),)
    assert subject.queue.release_leftovers([payload(1)], [], seen_at) == 1
    assert subject.queue.leftovers(100) == Leftovers()
    assert subject.queue.ack(delivery.token)  # the lease's own entry is still there to end
    again = subject.queue.claim("w", LEASE)
    assert again is not None and again.raw == payload(1)


def test_release_puts_payloads_at_the_claim_end_and_deletes_their_stamps(subject: QueueUnderTest) -> None:
    q = subject.queue
    for task_id in (1, 2):
        subject.lpush(payload(task_id))
        subject.original_take(str(1700000000 + task_id))
    q.push(payload(3))  # waiting in ready
    found = q.leftovers(100)
    assert q.release_leftovers(found.payloads, found.stamps, subject.clock.now_ms()) == 2
    assert q.leftovers(100) == Leftovers()
    deliveries = [claimed(q) for _ in range(3)]
    assert Counter(d.raw for d in deliveries[:2]) == Counter([payload(1), payload(2)])
    assert deliveries[2].raw == payload(3)
    for delivery in deliveries:
        assert q.ack(delivery.token)
    assert q.leftovers(100) == Leftovers()
    assert (q.stats().processing, q.claim("w", LEASE)) == (0, None)


def test_release_never_takes_a_leased_payload(subject: QueueUnderTest) -> None:
    q = subject.queue
    q.push(payload(1))
    delivery = claimed(q)
    # What a sweep that saw payload 1 lease-less a moment before its claim would ask for.
    assert q.release_leftovers([payload(1)], [], subject.clock.now_ms()) == 0
    assert q.claim("w", LEASE) is None
    assert q.extend(delivery.token, LEASE) and q.ack(delivery.token)


def test_release_never_takes_a_payload_another_sweeper_released_and_a_worker_claimed(
    subject: QueueUnderTest,
) -> None:
    q = subject.queue
    for task_id in (1, 2):
        subject.lpush(payload(task_id))
        subject.original_take(None)
    subject.clock.advance(5_000)
    seen_at = q.now_ms()
    found = q.leftovers(100)  # this sweeper's sighting
    assert q.release_leftovers([payload(1)], [], q.now_ms()) == 1  # another sweeper was quicker
    delivery = q.claim("w", LEASE)
    assert delivery is not None and delivery.raw == payload(1)
    # Processing still holds a lease-less entry (payload 2), so only the claim's stamp protects payload 1.
    assert q.release_leftovers(found.payloads, found.stamps, seen_at) == 1  # payload 2 only
    assert claimed(q).raw == payload(2)
    assert q.claim("w", LEASE) is None  # payload 1 was not put in ready a second time
    assert q.ack(delivery.token)


def test_release_keeps_a_stamp_that_changed_since_it_was_seen(subject: QueueUnderTest) -> None:
    subject.original_stamp(9, "1700000009")
    now = subject.clock.now_ms()
    assert subject.queue.release_leftovers([], [(9, "1700000001")], now) == 0
    assert subject.queue.leftovers(100).stamps == ((9, "1700000009"),)
    assert subject.queue.release_leftovers([], [(9, "1700000009")], now) == 0
    assert subject.queue.leftovers(100) == Leftovers()


def test_a_released_payload_is_kept_byte_for_byte(subject: QueueUnderTest) -> None:
    raw = json.dumps({"task_id": 5, "task_name": "接口文档/é 检查"}, ensure_ascii=False)
    subject.lpush(raw)
    subject.original_take("1700000005")
    found = subject.queue.leftovers(100)
    assert found.payloads == (raw,)
    assert subject.queue.release_leftovers(found.payloads, found.stamps, subject.clock.now_ms()) == 1
    delivery = subject.queue.claim("w", LEASE)
    assert delivery is not None and delivery.raw == raw
