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
    grouper: Grouper[int, int] = Grouper(slow_double)
    assert hammer(grouper) == []
    # Each item's thread wakes once when its group ends, and the oldest waiting also when a group
    # may go: a little over one wake an item (1.0 here). Waking every waiting thread at each
    # group's end wakes the half not in the group in flight too: 1.8-1.9 an item here.
    per_item = CountingCondition.wakes / grouper.requests
    assert per_item < 1.5, per_item
