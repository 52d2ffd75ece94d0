"""How the event loop calls the ports, which block (redis-py, SQLAlchemy): on a bounded pool of
threads in production; inline, on virtual time, in the simulation (``sim.aio.SimPortCalls``).

Waiting for work is the one call that blocks for long, so it has a method of its own: the
simulation replaces it by its own notion of "ready has an item" and time passing. The claim path
(claims, waits, a claimed batch's starts) has threads of its own: when C answers arrive together,
their C end-of-attempt writes queue for the shared threads, and a claim queued behind them would
hold every next request back until the whole burst was written.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Delivery

T = TypeVar("T")


class PortCalls(Protocol):
    busy: int  # calls in progress (a stop leaves the pools open while one still blocks)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one blocking port call and return its result (or raise its error)."""

    async def claim(self, fn: Callable[..., T], *args: Any) -> T:
        """``call`` for the claim path: it does not queue behind the other calls."""

    async def wait_claim(self, proc: TaskProcessor, timeout_s: float) -> list[Delivery]:
        """Block until ready has a payload (``timeout_s`` at most) and lease it (the claim path)."""

    def close(self) -> None:
        """Release what the calls ran on (threads); the service's last step."""


def threads_for(concurrency: int) -> int:
    """Threads for port calls: an attempt spends milliseconds in them and seconds in the LLM, so
    a few dozen serve a thousand attempts; the Redis and SQL pools are sized from this number.
    Five are kept beyond the attempts for the process's own Redis users (the dispatcher's blocking
    wait, the heartbeat, the presence beat, the LLM gate's poll, one spare): when Redis stops
    answering (a half-open link) each of them can hold a thread until the socket timeout, and the
    fenced database writes of the attempts must still find one."""
    return max(8, min(32, concurrency + 5 + 3))


# The claim path's own threads: the dispatcher's claim or wait, and the starts of the one or two
# batches it claimed before (``Worker._begin_batch`` runs beside the next claim).
CLAIM_THREADS = 3


class ThreadedPortCalls:
    def __init__(self, threads: int):
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="port")
        self.claims = ThreadPoolExecutor(CLAIM_THREADS, thread_name_prefix="claim")
        self._lock = threading.Lock()
        self.busy = 0  # calls running in a thread now (one may outlive the await that gave up on it)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(self._run, fn, *args))

    async def claim(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.claims, functools.partial(self._run, fn, *args))

    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            self.busy += 1
        try:
            return fn(*args)
        finally:
            with self._lock:
                self.busy -= 1

    async def wait_claim(self, proc: TaskProcessor, timeout_s: float) -> list[Delivery]:
        return await self.claim(proc.wait_claim, timeout_s)

    def close(self) -> None:
        # A blocked wait ends within its own timeout; nothing waits for it.
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.claims.shutdown(wait=False, cancel_futures=True)
