"""Waiting on the event loop's clock (virtual in the simulation) that a stop request cuts short."""

from __future__ import annotations

import asyncio
import contextlib


async def sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set meanwhile."""
    if stop.is_set():
        return
    if seconds <= 0:
        await asyncio.sleep(0)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
