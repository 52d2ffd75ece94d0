"""``runtime.grouper.Grouper`` under many threads at once: every caller gets its own answer, and a
group's end wakes its members and the oldest waiter, not every waiting thread."""

from __future__ import annotations

import threading
import time
import types

import pytest

from docllm.runtime import grouper as grouper_module
from docllm.runtime.grouper import Grouper

THREADS, EACH = 32, 100


class CountingCondition(threading.Condition):
    wakes = 0  # returns from wait(), over every condition of the test

    def wait(self, timeout: float | None = None) -> bool:
        woken = super().wait(timeout)
        CountingCondition.wakes += 1  # under the condition's lock, shared by the grouper's waiters
        return woken


def hammer(grouper: Grouper[int, int]) -> list[BaseException]:
    """THREADS threads each submit EACH items at once; what went wrong, if anything."""
    errors: list[BaseException] = []

    def caller(k: int) -> None:
        try:
            for i in range(EACH):
                item = k * EACH + i
                assert grouper.submit(item) == 2 * item
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a caller never got its answer"
    return errors


def slow_double(items: list[int]) -> list[int]:
    time.sleep(0.001)  # a round trip: the other callers' items gather meanwhile
    return [2 * x for x in items]


def test_many_callers_at_once_each_get_their_own_answer_in_groups():
    grouper: Grouper[int, int] = Grouper(slow_double)
    assert hammer(grouper) == []
    assert grouper.requests == THREADS * EACH and grouper.groups < grouper.requests / 4  # grouped
    assert grouper.in_flight == 0 and grouper.waiting() == 0


def test_a_groups_end_wakes_its_members_and_the_oldest_waiter_not_every_thread(monkeypatch: pytest.MonkeyPatch):
    counting = types.SimpleNamespace(Condition=CountingCondition, Lock=threading.Lock)
    monkeypatch.setattr(grouper_module, "threading", counting)
    CountingCondition.wakes = 0
    # No linger ends in this test (a busy machine's pauses would end some): every wake is a notify.
    grouper: Grouper[int, int] = Grouper(slow_double, linger_s=60.0)
    assert hammer(grouper) == []
    # Each item's thread wakes once when its group ends, and the oldest sleeping one also when a
    # group may go: a little over one wake an item (1.0 here). Waking every waiting thread at each
    # group's end wakes the half not in the group in flight too: 1.85-1.87 an item here.
    per_item = CountingCondition.wakes / grouper.requests
    assert per_item < 1.5, per_item


def test_a_group_may_go_beside_one_whose_leader_is_the_oldest_waiter():
    """The oldest waiting item's own thread may be busy leading another group (it took a full group
    ahead of its item): a caller behind it still leads the next group once the linger is over."""
    sizes = {"a": 1, "p": 3, "q": 2, "r": 1}
    held = {"a": threading.Event(), "p": threading.Event()}
    sent: list[list[str]] = []

    def send(items: list[str]) -> list[str]:
        sent.append(items)
        for item in items:
            if item in held:
                assert held[item].wait(30)
        return items

    now = [0.0]  # the grouper's clock: no linger is over until the test says so
    grouper: Grouper[str, str] = Grouper(send, size=sizes.__getitem__, linger_s=0.05, max_group=4, clock=lambda: now[0])

    def submit(item: str) -> threading.Thread:
        thread = threading.Thread(target=grouper.submit, args=(item,))
        thread.start()
        return thread

    def until(what) -> None:
        deadline = time.monotonic() + 5  # well before a held group gives up (30 s)
        while not what():
            assert time.monotonic() < deadline, sent
            time.sleep(0.005)

    threads = [submit("a")]  # goes at once, held
    until(lambda: sent == [["a"]])
    threads.append(submit("p"))
    until(lambda: grouper.waiting() == 1)
    threads.append(submit("q"))  # p and q make more than a group: q's thread leads p's, held
    until(lambda: sent == [["a"], ["p"]])
    threads.append(submit("r"))  # two groups in flight: r waits behind q
    until(lambda: grouper.waiting() == 2)
    time.sleep(0.2)  # four lingers of real time: every waiter's thread that naps sleeps again
    held["a"].set()  # a group may go now; q's thread is still busy with p's
    until(lambda: grouper.in_flight == 1)
    now[0] += 1.0  # q's linger is over: r's thread leads q's group
    until(lambda: ["q", "r"] in sent)
    assert not held["p"].is_set()
    held["p"].set()
    for thread in threads:
        thread.join(30)
    assert grouper.in_flight == 0 and grouper.waiting() == 0
