"""A group that fails for what one item holds fails that item only (issue 44): ``send_bisected``
halves it down to the refused item, both groupers answer the others, and a report is stored with
its lone surrogates replaced (``domain.tasks.storable``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from docllm.domain.errors import Unavailable, Unstorable
from docllm.domain.tasks.storable import MAX_ERROR_CHARS, REPLACED_KEY, storable_error, storable_report
from docllm.runtime.grouper import Failed, Grouper, send_bisected
from docllm.runtime.loop_grouper import LoopGrouper
from sim.aio import VirtualTime

POISON = 13


class Store:
    """Refuses any group that holds ``POISON``; counts the groups it was sent."""

    def __init__(self, outage: bool = False) -> None:
        self.sent: list[list[int]] = []
        self.outage = outage

    def send(self, items: list[int]) -> list[int]:
        self.sent.append(list(items))
        if self.outage:
            raise Unavailable("database down")
        if POISON in items:
            raise Unstorable(f"item {POISON} cannot be stored")
        return [2 * x for x in items]


def test_a_refused_group_is_halved_down_to_the_item_that_fails_alone():
    store = Store()
    answers = send_bisected(store.send, list(range(10, 26)))
    failed = [i for i, a in zip(range(10, 26), answers, strict=True) if isinstance(a, Failed)]
    assert failed == [POISON]
    assert [a for a in answers if not isinstance(a, Failed)] == [2 * x for x in range(10, 26) if x != POISON]
    assert len(store.sent) <= 2 * 4 + 1  # log2(16) halvings: the clean halves go whole


def test_an_outage_fails_the_whole_group_at_once_without_halving():
    store = Store(outage=True)
    answers = send_bisected(store.send, list(range(8)))
    assert all(isinstance(a, Failed) and isinstance(a.error, Unavailable) for a in answers)
    assert len(store.sent) == 1  # a server that is down is not asked again per half


def test_an_outage_met_while_halving_fails_only_the_half_it_hit():
    calls: list[list[int]] = []

    def send(items: list[int]) -> list[int]:
        calls.append(items)
        if len(calls) == 1:
            raise ValueError("refused")
        if len(calls) == 2:
            return list(items)
        raise Unavailable("down now")

    answers = send_bisected(send, [1, 2, 3, 4])
    assert answers[:2] == [1, 2]  # landed: its callers must not hear of an error
    assert all(isinstance(a, Failed) and isinstance(a.error, Unavailable) for a in answers[2:])


def test_the_threaded_grouper_answers_every_caller_of_a_refused_group_but_the_guilty_one():
    store = Store()
    gate = threading.Event()

    def held(items: list[int]) -> list[int]:
        gate.wait(5)  # the first group holds the others back: they gather into one group
        return store.send(items)

    grouper: Grouper[int, int] = Grouper(held, linger_s=0.05)
    results: dict[int, Any] = {}

    def caller(x: int) -> None:
        try:
            results[x] = grouper.submit(x)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results[x] = exc

    threads = [threading.Thread(target=caller, args=(x,)) for x in range(10, 20)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert isinstance(results.pop(POISON), Unstorable)
    assert results == {x: 2 * x for x in range(10, 20) if x != POISON}
    assert any(POISON in group and len(group) > 1 for group in store.sent), store.sent  # it was in a group


def test_the_loop_grouper_answers_every_caller_of_a_refused_group_but_the_guilty_one():
    store = Store()

    class Calls:
        busy = 0

        async def call(self, fn: Any, *args: Any) -> Any:
            await asyncio.sleep(0.001)
            return fn(*args)

    async def main() -> dict[int, Any]:
        grouper: LoopGrouper[int, int] = LoopGrouper(Calls(), store.send, linger_s=0.01)
        futures = {x: asyncio.ensure_future(grouper.submit(x)) for x in range(10, 20)}
        await asyncio.wait(futures.values())
        return {x: f.exception() or f.result() for x, f in futures.items()}

    results = VirtualTime().run(main())
    assert isinstance(results.pop(POISON), Unstorable)
    assert results == {x: 2 * x for x in range(10, 20) if x != POISON}
    assert any(POISON in group and len(group) > 1 for group in store.sent), store.sent


def test_a_report_with_lone_surrogates_is_stored_replaced_and_says_how_many():
    report = {"summary": "ok \ud800", "findings": [{"message": "a \udfff b \ud83d", "quote": "é"}], "k\udc00": 1}
    stored = storable_report(report)
    assert stored["summary"] == "ok \ufffd"
    assert stored["findings"][0]["message"] == "a \ufffd b \ufffd"
    assert "k\ufffd" in stored
    assert stored[REPLACED_KEY] == 4
    stored_text = repr(stored).encode("utf-8")  # every string now encodes
    assert stored_text


def test_a_storable_report_is_left_as_it_is():
    report = {"summary": "fine 😀 é", "findings": []}
    assert storable_report(report) is report


@pytest.mark.parametrize("text", ["x" * (MAX_ERROR_CHARS + 10), "bad \ud800 char"], ids=["long", "surrogate"])
def test_an_error_text_is_stored_cut_and_replaced(text: str):
    error = storable_error(text)
    assert len(error) <= MAX_ERROR_CHARS
    error.encode("utf-8")


def test_the_workers_outage_backoff_is_jittered_so_processes_do_not_retry_in_lockstep():
    import logging
    import random

    from docllm.runtime.outage import Outage

    draws = random.Random(7)
    waits = [Outage("db", logging.getLogger("t"), draw=draws.random).failed(Unavailable("down")) for _ in range(20)]
    assert all(0.25 <= w <= 0.5 for w in waits) and len(set(waits)) == len(waits)  # the first wait, spread
    assert Outage("db", logging.getLogger("t")).failed(Unavailable("down")) == 0.5  # no draw: as it was
