"""Answers handled a few per event-loop iteration, in the order they came (issue 24's bursts).

When C answers arrive together, asyncio wakes all C requests in one iteration: each runs the
SDK's and the reviewer's handling of its answer, and whatever an answer starts next (its end's
write, the next claim and request) waits for the next iteration, after all C. Every attempt of
the burst then ends when the last one does, and the next C requests leave together: a burst
again one round later. A turn taken right after an answer is read lets ``WIDTH`` answers through
per iteration: an attempt ends as its answer is handled, and the next request goes meanwhile.
"""

from __future__ import annotations

import asyncio
from collections import deque
from weakref import WeakKeyDictionary

WIDTH = 16  # answers per iteration: ~10 ms of handling, short enough to interleave, long enough to batch


class AnswerTurns:
    """At most ``width`` callers of ``take`` go on per iteration of one event loop, first come first
    served."""

    def __init__(self, loop: asyncio.AbstractEventLoop, width: int = WIDTH):
        self.loop, self.width = loop, width
        self._given = 0  # turns given in this iteration
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._next: asyncio.Handle | None = None  # the next iteration's hand-out

    async def take(self) -> None:
        """Return at once while turns are left in this iteration and nobody waits; otherwise in a
        later iteration, in turn."""
        if self._given < self.width and not self._waiting:
            self._given += 1
            self._hand_out_next()
            return
        turn = self.loop.create_future()
        self._waiting.append(turn)
        self._hand_out_next()
        await turn

    def _hand_out_next(self) -> None:
        if self._next is None:
            self._next = self.loop.call_soon(self._hand_out)

    def _hand_out(self) -> None:
        self._next, self._given = None, 0
        while self._waiting and self._given < self.width:
            turn = self._waiting.popleft()
            if not turn.done():  # a waiter cancelled meanwhile needs no turn
                turn.set_result(None)
                self._given += 1
        if self._given:  # the iteration these turns run in counts them
            self._hand_out_next()


_BY_LOOP: WeakKeyDictionary[asyncio.AbstractEventLoop, AnswerTurns] = WeakKeyDictionary()


async def take_turn() -> None:
    """A turn of the running loop's answers (every reviewer of a process shares its loop's)."""
    loop = asyncio.get_running_loop()
    turns = _BY_LOOP.get(loop)
    if turns is None:
        turns = _BY_LOOP[loop] = AnswerTurns(loop)
    await turns.take()
