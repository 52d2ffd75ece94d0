"""Grouping calls that the event loop's coroutines make at once into one port call per group: the
commits of the attempts that end together (``TaskProcessor.commit_many``), so that an attempt's end
costs no thread hop and no waiting port thread of its own (issue 24).

A group goes as ``grouper.Grouper`` lets one go, on the loop instead of the port threads:

- no group is in flight: at once, with whatever is waiting (a lone item is not delayed);
- one group is in flight and ``max_in_flight`` allows another: once the oldest waiting item has
  lingered ``linger_s``, or a full group (``max_group``) is waiting (``grouper.may_go``).

A group that fails for an outage fails every item it carried with the same error: each caller
retries as it would a single call; one that fails for another reason is halved down to the item
that fails alone (``grouper.send_bisected``), in the same port call. A caller that stops waiting
(its ``wait_for`` ran out) leaves its item in the group it is in, whose call goes on; an item not
yet in a group is dropped, as a port call not yet started is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from docllm.runtime.grouper import MAX_GROUP, MAX_IN_FLIGHT, Failed, bisecting, may_go

Item = TypeVar("Item")
Answer = TypeVar("Answer")
T = TypeVar("T")


class Calls(Protocol):
    """What a group is sent through: ``PortCalls.call``."""

    async def call(self, fn: Callable[..., T], *args: Any) -> T: ...


class LoopGrouper(Generic[Item, Answer]):
    """``await submit(item)`` is ``calls.call(send, [item])[0]``, with the items submitted while
    groups are in flight sent together. ``send`` answers one per item, in order."""

    def __init__(
        self,
        calls: Calls,
        send: Callable[[list[Item]], Sequence[Answer]],
        linger_s: float = 0.005,
        max_group: int = MAX_GROUP,
        max_in_flight: int = MAX_IN_FLIGHT,
    ):
        self.calls, self.send = calls, send
        self.linger_s, self.max_group, self.max_in_flight = linger_s, max_group, max_in_flight
        self.waiting: list[tuple[Item, asyncio.Future[Answer], float]] = []
        self.in_flight = 0
        self._timer: asyncio.TimerHandle | None = None
        self._groups: set[asyncio.Task[None]] = set()  # strong references while they run

    async def submit(self, item: Item) -> Answer:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Answer] = loop.create_future()
        self.waiting.append((item, answer, loop.time()))
        self._maybe_send(loop)
        return await answer

    def _maybe_send(self, loop: asyncio.AbstractEventLoop) -> None:
        while self.waiting and self.in_flight < self.max_in_flight:
            self.waiting = [w for w in self.waiting if not w[1].done()]  # callers that gave up
            if not self.waiting:
                return
            size, lingered_at = len(self.waiting), self.waiting[0][2] + self.linger_s
            if not may_go(self.in_flight, self.max_in_flight, size, self.max_group, lingered_at, loop.time()):
                if self._timer is None:  # look again once the oldest has lingered
                    self._timer = loop.call_at(lingered_at, self._lingered, loop)
                return
            group, self.waiting = self.waiting[: self.max_group], self.waiting[self.max_group :]
            self.in_flight += 1
            task = loop.create_task(self._run(group))
            self._groups.add(task)
            task.add_done_callback(self._groups.discard)

    def _lingered(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._maybe_send(loop)

    async def _run(self, group: list[tuple[Item, asyncio.Future[Answer], float]]) -> None:
        try:
            answers = await self.calls.call(
                bisecting(self.send), [item for item, _, _ in group]
            )  # halved down to a refused item
        except asyncio.CancelledError:  # the loop is being torn down
            for _, answer, _ in group:
                answer.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - each caller gets the group's error as its own
            for _, answer, _ in group:
                if not answer.done():
                    answer.set_exception(exc)
        else:
            for (_, answer, _), result in zip(group, answers, strict=True):  # one per item (send_bisected)
                if answer.done():
                    continue
                if isinstance(result, Failed):
                    answer.set_exception(result.error)
                else:
                    answer.set_result(result)
        finally:
            self.in_flight -= 1
            self._maybe_send(asyncio.get_running_loop())
