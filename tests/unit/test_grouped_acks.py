"""The worker's grouped acks (docllm.runtime.grouped_acks): acks that wait at once go in one
``ack_many``, each ends its own lease, and a failed group answers every ack in it."""

from __future__ import annotations

import threading

import pytest

from docllm.domain.errors import Unavailable
from docllm.domain.tasks.payload import make_payload
from docllm.runtime.grouped_acks import GroupedAcks
from docllm.runtime.grouper import Grouper
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.runtime_rig import wait_until

WAIT_S = 30.0  # how long a test waits for threads to get somewhere: generous, never reached when green
LEASE_MS = 60_000


class GatedQueue(InMemoryTaskQueue):
    """The queue with its ``ack_many`` behind a gate (no sleeps: the test opens it); each call's
    tokens are recorded, and the next ``fail_next`` calls raise as a Redis outage would."""

    def __init__(self) -> None:
        super().__init__(ManualClock())
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_next = 0

    def ack_many(self, tokens: list[str]) -> list[bool]:
        self.calls.append(list(tokens))
        failing = self.fail_next > 0
        self.fail_next -= failing
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        if failing:
            raise Unavailable("redis down (test)")
        return super().ack_many(tokens)


def leases(queue: GatedQueue, n: int) -> list[str]:
    for task_id in range(1, n + 1):
        queue.push(make_payload(task_id, f"t{task_id}"))
    tokens = []
    for _ in range(n):
        delivery = queue.claim("w1", LEASE_MS)
        assert delivery is not None
        tokens.append(delivery.token)
    return tokens


def acked_on_threads(acks: GroupedAcks, tokens: list[str]) -> tuple[list[threading.Thread], list[object]]:
    out: list[object] = [None] * len(tokens)

    def run(i: int) -> None:
        try:
            out[i] = acks.ack(tokens[i])
        except Unavailable as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(tokens))]
    for t in threads:
        t.start()
    return threads, out


def joined(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(WAIT_S)
        assert not t.is_alive(), "an ack never returned"


def first_held_then_the_rest(queue: GatedQueue, acks: GroupedAcks, tokens: list[str]) -> list[object]:
    """The first token's ack in flight, held at the gate; the others acked meanwhile, each on its
    own thread, waiting; then the gate opens. Every ack's answer, in token order."""
    queue.gate.clear()
    first, first_out = acked_on_threads(acks, tokens[:1])
    wait_until(lambda: acks.acks.in_flight == 1, WAIT_S)
    rest, rest_out = acked_on_threads(acks, tokens[1:])
    wait_until(lambda: acks.acks.waiting() == len(tokens) - 1, WAIT_S)
    queue.gate.set()
    joined(first + rest)
    return first_out + rest_out


def test_acks_that_wait_while_one_is_in_flight_go_in_one_call_and_each_ends_its_lease():
    queue = GatedQueue()
    acks = GroupedAcks(queue, linger_s=60.0)  # the linger never ends: only the first group's end lets them go
    tokens = leases(queue, 9)
    assert first_held_then_the_rest(queue, acks, tokens) == [True] * 9
    assert [len(c) for c in queue.calls] == [1, 8]  # two script calls for nine acks
    assert queue.stats().processing == 0
    assert acks.ack(tokens[0]) is False  # a lease already ended: refused as a lone ack is


def test_a_failed_group_answers_each_of_its_acks_with_the_error_and_the_leases_stay():
    queue = GatedQueue()
    acks = GroupedAcks(queue, linger_s=60.0)
    tokens = leases(queue, 4)
    queue.fail_next = 2
    assert all(isinstance(r, Unavailable) for r in first_held_then_the_rest(queue, acks, tokens))
    assert queue.stats().processing == 4  # nothing ended: each attempt handles its failed ack as before
    assert [acks.ack(t) for t in tokens] == [True] * 4


def test_every_other_call_goes_straight_to_the_queue():
    queue = GatedQueue()
    acks = GroupedAcks(queue, linger_s=0.005)
    (token,) = leases(queue, 1)
    assert acks.extend(token, LEASE_MS) and acks.stats().processing == 1
    assert queue.calls == []


def test_a_send_that_answers_the_wrong_number_fails_its_group_instead_of_hanging_it():
    grouper: Grouper[str, bool] = Grouper(lambda items: [True] * (len(items) + 1))
    with pytest.raises(RuntimeError, match="a group of 1 got 2 answers"):
        grouper.submit("x")
    assert grouper.in_flight == 0 and grouper.waiting() == 0
