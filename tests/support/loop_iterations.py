"""Counting an event loop's iterations, for tests of what happens in which one."""

from __future__ import annotations

import asyncio


class Iterations:
    """Counts the loop's iterations from now on: a callback that schedules itself runs once in each."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.n, self.loop = 0, loop
        loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        self.loop.call_soon(self._tick)
