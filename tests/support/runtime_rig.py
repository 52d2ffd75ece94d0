"""The runtime's test doubles, shared by its unit tests: a reviewer and a provider that fail on
command, a queue that counts the worker's batches, and ``Rig`` (a Worker with its LlmGate over
in-memory adapters).

A rig runs on virtual time by default (``sim.aio.VirtualTime``, the simulation's loop): the port
calls run inline on the loop (``InlinePortCalls``), the adapters' clock is the loop's, and every
wait is an ``asyncio.sleep`` that costs no wall-clock time. ``Rig(..., threads=True)`` is the
production arrangement (``ThreadedPortCalls``, the monotonic clock) for the few tests about a port
call blocked in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from docllm.domain.errors import ConfigurationError, ProviderUnavailable
from docllm.domain.events import RecordingEvents
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Delivery, TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reaper import Reaper
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import ThreadedPortCalls
from docllm.runtime.worker import Worker
from sim.aio import VirtualTime
from tests.support.memory.breaker import InMemoryLlmBreaker
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

T = TypeVar("T")


class RealClock:
    def now_ms(self) -> int:
        return int(time.monotonic() * 1000)


class InlinePortCalls:
    """``PortCalls`` on virtual time: a call runs inline on the loop (the in-memory adapters never
    block) after a round trip of ``latency`` seconds of loop time (1 ms: Redis on a LAN), so time
    moves while the runtime talks to its ports, as in production: a loop that goes round without
    ever waiting otherwise shows as a run of calls, not as one frozen instant. ``slow`` gives a
    call (a function or bound method) a reply that comes that many seconds after it ran: what it
    did is done, its answer is late, and the loop runs on meanwhile. ``wait_claim`` is Redis's
    blocking wait: it returns as soon as ready has an item (``ready()``, looked at after every turn
    of the loop) or after its timeout, then claims without blocking."""

    def __init__(self, time: VirtualTime, ready: Callable[[], int], latency: float = 0.001):
        self.time, self.ready, self.latency = time, ready, latency
        self.slow: dict[Callable[..., Any], float] = {}
        self.busy = 0
        self._waiting: list[asyncio.Future[None]] = []
        time.after_turn.append(self._wake)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        self.busy += 1
        try:
            await asyncio.sleep(self.latency)
            result = fn(*args)
            delay = self.slow.get(fn, 0.0)
            if delay > 0:
                await asyncio.sleep(delay)
            return result
        finally:
            self.busy -= 1

    claim = call  # no queue of calls to go ahead of: each runs inline

    async def wait_claim(self, proc: TaskProcessor, timeout_s: float) -> list[Delivery]:
        if timeout_s > 0 and not self.ready():
            woken = asyncio.get_running_loop().create_future()
            self._waiting.append(woken)
            try:
                await asyncio.wait_for(woken, timeout_s)
            except TimeoutError:
                pass
            finally:
                if woken in self._waiting:
                    self._waiting.remove(woken)
        return await self.call(proc.wait_claim, 0)

    def _wake(self) -> None:
        if self._waiting and self.ready():
            for woken in self._waiting:
                if not woken.done():
                    woken.set_result(None)
            self._waiting.clear()

    def close(self) -> None:
        """Nothing to close (``Service`` closes its port calls when it ends)."""


class FakeReviewer:
    """Takes ``seconds`` per review; counts reviews running at once, calls and cancellations."""

    name = "fake"

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.running = self.peak = self.calls = self.cancelled = self.completed = 0
        self.broken = False  # ConfigurationError while True
        self.refused: set[str] = set()  # documents a filtering gateway refuses (403) while the key works
        self.closed_on: asyncio.AbstractEventLoop | None = None  # the loop ``close`` ran on

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        if self.broken or task_name in self.refused:
            raise ConfigurationError("401 Unauthorized: check DOCLLM_LLM_API_KEY")
        self.calls += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        self.completed += 1
        return {"findings": [], "summary": "ok"}

    async def check(self) -> None:
        if self.broken:
            raise ConfigurationError("still 401")

    async def close(self) -> None:
        self.closed_on = asyncio.get_running_loop()


class FlakyProvider(FakeReviewer):
    """``down``: every review and every check fails as an unreachable provider does; a document
    named in ``poison`` always gets a 500 while the provider serves everything else."""

    def __init__(self, seconds: float = 0.0):
        super().__init__(seconds)
        self.down = False
        self.poison: set[str] = set()
        self.sent = self.checks = 0

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        self.sent += 1
        if self.down:
            raise ProviderUnavailable("cannot reach the LLM")
        if task_name in self.poison:
            raise ProviderUnavailable("the LLM answered 500")
        return await super().review(task_name, document)

    async def check(self) -> None:
        self.checks += 1
        if self.down:
            raise ProviderUnavailable("cannot reach the LLM")


class CountingQueue(InMemoryTaskQueue):
    """Records the claim batches and heartbeat batches the worker sends."""

    def __init__(self, clock: Any):
        super().__init__(clock)
        self.claims: list[int] = []
        self.stages = 0
        self.extends: list[int] = []

    def claim_batch(
        self, worker_id: str, lease_ms: int, limit: int, lanes: tuple[str, ...] | None = None
    ) -> list[Delivery]:
        self.claims.append(limit)
        return super().claim_batch(worker_id, lease_ms, limit, lanes)

    def stage(self, timeout_s: float) -> str | None:
        self.stages += 1
        return super().stage(timeout_s)

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        self.extends.append(len(tokens))
        return super().extend_many(tokens, lease_ms)


class Rig:
    def __init__(
        self,
        reviewer: Any,
        lease: float = 0.3,
        max_runtime: float = 30.0,
        concurrency: int = 2,
        idle_wait: float = 0.05,
        breaker: BreakerPolicy | None = None,
        threads: bool = False,
    ):
        # Every scenario ends within a minute or so of virtual time; one that does not is stuck.
        self.time: VirtualTime | None = None if threads else VirtualTime(limit_s=120.0)
        self.clock: Any = self.time if self.time is not None else RealClock()
        # How often ``until`` looks: every millisecond of virtual time (the loop's resolution: a
        # condition is seen the moment it holds), or every 20 ms of real time.
        self.poll = 0.001 if self.time is not None else 0.02
        self.queue = CountingQueue(self.clock)
        self.repo = InMemoryTaskRepository()
        self.events = RecordingEvents()
        self.reviewer = reviewer
        self.lease = LeasePolicy(lease_seconds=lease, max_runtime_seconds=max_runtime, reaper_interval_seconds=0.05)
        self.retry = RetryPolicy(max_attempts=3, base_seconds=0.05, cap_seconds=0.1)
        self.proc = TaskProcessor(
            self.queue, self.repo, reviewer, self.clock, self.retry, self.lease, "w", events=self.events
        )
        self.calls: Any = (
            ThreadedPortCalls(4) if self.time is None else InlinePortCalls(self.time, lambda: self.queue.stats().ready)
        )
        policy = breaker or BreakerPolicy(window_seconds=10, failure_ratio=0.5, min_calls=5, open_seconds=0.3)
        self.breaker = InMemoryLlmBreaker(self.clock, policy)
        self.gate = LlmGate(
            reviewer,
            self.breaker,
            self.calls,
            "w",
            logging.getLogger("test"),
            self.events,
            poll_seconds=0.05,
            base=0.05,
            cap=0.1,
        )
        self.worker = Worker(self.proc, self.calls, self.gate, concurrency, idle_wait_seconds=idle_wait)

    def submit(self, n: int = 1, prefix: str = "d") -> list[int]:
        return [submit(self.repo, self.queue, f"{prefix}{i}.md", "# T\n\nx\n").task_id for i in range(n)]

    def statuses(self, ids: list[int]) -> list[TaskStatus | None]:
        return [row.status if row is not None else None for row in map(self.repo.get, ids)]

    def now(self) -> float:
        """The event loop's time (virtual, or monotonic with threads), also after the run."""
        return self.time.time() if self.time is not None else time.monotonic()

    async def until(
        self,
        predicate: Callable[[], object],
        timeout: float = 10.0,
        each: Callable[[], object] | None = None,
        every: float | None = None,
    ) -> None:
        """Wait until ``predicate()`` holds, ``timeout`` seconds of the loop's time at most, looking
        every ``every`` seconds (``poll`` by default) and doing ``each()`` after every look that
        failed (a reaper's cycle, say)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while loop.time() < end:
            if predicate():
                return
            if each is not None:
                each()
            await asyncio.sleep(every or self.poll)
        raise AssertionError("condition not reached in time")

    def reaping(self) -> Callable[..., Awaitable[None]]:
        """``until`` with a reaper beside it: a cycle (it promotes the delayed retries) every 20 ms."""
        reaper = Reaper(self.queue, self.repo, self.retry)

        async def until(predicate: Callable[[], object], timeout: float = 15.0) -> None:
            await self.until(predicate, timeout, each=reaper.reap_once, every=0.02)

        return until

    def run_loop(self, main: Callable[[], Awaitable[T]]) -> T:
        """Run ``main()`` on the rig's loop (virtual, or a real one) until it ends."""

        async def wrapped() -> T:
            return await main()

        try:
            if self.time is not None:
                return self.time.run(wrapped())
            return asyncio.run(wrapped())
        finally:
            if self.time is not None:
                self.time.close()
            else:
                self.calls.close()


def run(rig: Rig, scenario: Callable[[Rig], Awaitable[T]], stop_grace: float = 0.0) -> T:
    """Run the worker and ``scenario(rig)`` on one event loop; stop the worker at the end."""

    async def main() -> T:
        worker = asyncio.create_task(rig.worker.run())
        try:
            return await scenario(rig)
        finally:
            rig.worker.stop(stop_grace)
            await asyncio.wait_for(worker, 10)

    return rig.run_loop(main)


def wait_until(predicate: Callable[[], object], timeout: float = 5.0) -> None:
    """Wait in real time, from a thread other than the loop's (a ``Service`` started in its own
    thread, for the tests about port calls blocked in threads)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")
