"""``LoopGrouper``: the event loop's calls that come at once go to the port threads as one call per
group (the commits of attempts that end together, issue 24), and each caller gets its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from docllm.domain.errors import Unavailable
from docllm.domain.tasks.model import TaskStatus
from docllm.runtime.loop_grouper import LoopGrouper
from sim.aio import VirtualTime
from tests.support.runtime_rig import FakeReviewer, Rig, run


class HeldCalls:
    """Port calls that run at once and answer when the test lets them (``release``)."""

    def __init__(self) -> None:
        self.busy = 0
        self.gates: list[asyncio.Event] = []

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        gate = asyncio.Event()
        self.gates.append(gate)
        try:
            result, error = fn(*args), None
        except Exception as exc:  # noqa: BLE001 - raised when the answer comes, as a real call's would
            result, error = None, exc
        await gate.wait()
        if error is not None:
            raise error
        return result

    def release(self, i: int) -> None:
        self.gates[i].set()


def doubled(sent: list[list[int]]) -> Callable[[list[int]], list[int]]:
    def send(items: list[int]) -> list[int]:
        sent.append(list(items))
        return [2 * i for i in items]

    return send


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_lone_item_goes_at_once_and_the_items_behind_a_group_go_together():
    async def main() -> None:
        calls, sent = HeldCalls(), list[list[int]]()
        grouper = LoopGrouper(calls, doubled(sent), linger_s=60.0)  # no linger runs out here
        first = asyncio.ensure_future(grouper.submit(1))
        await settle()
        assert sent == [[1]]  # not delayed
        rest = [asyncio.ensure_future(grouper.submit(i)) for i in (2, 3, 4)]
        await settle()
        assert sent == [[1]]  # a group is in flight and the linger is not over: they wait
        calls.release(0)
        await settle()
        assert sent == [[1], [2, 3, 4]]
        calls.release(1)
        assert await first == 2 and await asyncio.gather(*rest) == [4, 6, 8]

    VirtualTime().run(main())  # the lingers on the loop's virtual time: no machine is too slow


def test_a_second_group_goes_beside_the_first_when_lingered_or_full():
    async def main() -> None:
        calls, sent = HeldCalls(), list[list[int]]()
        grouper = LoopGrouper(calls, doubled(sent), linger_s=0.05, max_group=3)
        futures = [asyncio.ensure_future(grouper.submit(1))]
        await settle()
        futures.append(asyncio.ensure_future(grouper.submit(2)))
        await settle()
        assert sent == [[1]]  # one group in flight: item 2 lingers
        await asyncio.sleep(0.2)
        assert sent == [[1], [2]]  # its linger is over: a second group beside the first
        futures += [asyncio.ensure_future(grouper.submit(i)) for i in (3, 4, 5)]
        await asyncio.sleep(0.2)
        assert sent == [[1], [2]]  # two in flight, the most there may be, however full the next
        calls.release(0)
        await settle()
        assert sent == [[1], [2], [3, 4, 5]]
        futures.append(asyncio.ensure_future(grouper.submit(6)))
        await asyncio.sleep(0.2)
        futures += [asyncio.ensure_future(grouper.submit(i)) for i in (7, 8, 9)]
        await settle()
        assert sent == [[1], [2], [3, 4, 5]]  # 6 lingers no more, but two groups are in flight
        calls.release(1)
        await settle()
        assert sent == [[1], [2], [3, 4, 5], [6, 7, 8]]  # the oldest three: a full group
        calls.release(2)
        await settle()
        assert sent == [[1], [2], [3, 4, 5], [6, 7, 8]]  # item 9 lingers
        await asyncio.sleep(0.2)
        assert sent == [[1], [2], [3, 4, 5], [6, 7, 8], [9]]
        calls.release(3)
        calls.release(4)
        assert await asyncio.gather(*futures) == [2 * i for i in range(1, 10)]

    VirtualTime().run(main())  # the lingers on the loop's virtual time: no machine is too slow


def test_a_failed_group_fails_each_of_its_callers_and_a_caller_that_gave_up_is_left_out():
    async def main() -> None:
        calls, sent = HeldCalls(), list[list[int]]()

        def send(items: list[int]) -> list[int]:
            sent.append(list(items))
            raise Unavailable("the database is down")

        grouper = LoopGrouper(calls, send, linger_s=60.0)
        first = asyncio.ensure_future(grouper.submit(1))
        await settle()
        waiting = [asyncio.ensure_future(grouper.submit(i)) for i in (2, 3)]
        gave_up = asyncio.ensure_future(grouper.submit(4))
        await settle()
        gave_up.cancel()
        calls.release(0)
        await settle()
        calls.release(1)
        for f in [first, *waiting]:
            with pytest.raises(Unavailable):
                await f
        assert sent == [[1], [2, 3]]

    VirtualTime().run(main())  # the lingers on the loop's virtual time: no machine is too slow


def test_the_reports_of_a_burst_are_committed_in_a_few_port_calls():
    """C attempts whose reviews end together: their commits go as groups, not a port call each
    (each would be a thread hop and a waiting port thread in production)."""
    rig = Rig(FakeReviewer(0.1), concurrency=32)
    ids = rig.submit(32)
    counted: list[str] = []
    call = rig.calls.call

    async def counting(fn: Callable[..., Any], *args: Any) -> Any:
        counted.append(getattr(fn, "__name__", repr(fn)))
        return await call(fn, *args)

    rig.calls.call = counting

    async def scenario(rig: Rig) -> None:
        await rig.until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))

    run(rig, scenario)
    ends = [name for name in counted if name in ("commit_many", "finish")]
    assert 1 <= len(ends) <= 4, counted


def test_a_send_that_answers_too_few_fails_its_callers_instead_of_leaving_them_waiting():
    async def main() -> None:
        calls = HeldCalls()
        grouper: LoopGrouper[int, int] = LoopGrouper(calls, lambda items: items[:-1], linger_s=0.0)
        first = asyncio.ensure_future(grouper.submit(1))
        await settle()
        calls.release(0)
        with pytest.raises(RuntimeError, match="a group of 1 got 0 answers"):
            await first

    VirtualTime().run(main())
