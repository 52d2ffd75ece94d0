"""Whether this process may claim, and what a provider failure looked like from here: the fleet's
LLM breaker (shared through Redis, ARCHITECTURE.md, LLM boundary) and this process's own view of the LLM.

- Claims stop while the fleet's breaker is open. Half-open, one process at a time (a probe lease
  in Redis) probes the provider with ``reviewer.check()``; when it answers the breaker closes and
  every dispatcher claims again within a poll.
- An attempt that failed for a provider reason (no connection, timeout, 429, 5xx, 401/403, quota)
  is judged (``judge``): this host's own check, whether the provider served others since, the
  breaker. Whose fault that makes it is ``domain.tasks.verdict.decide``'s. A process whose own check
  fails stops claiming and checks again with backoff (a bad key, or a host cut off from the LLM).

The probe is ``check()`` rather than one real attempt: it costs one tiny request instead of a
whole document (every chunk), answers within the LLM timeout, and cannot be a poison document
whose own failure would keep the breaker open for ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from docllm.domain import events as ev
from docllm.domain.backoff import Backoff
from docllm.domain.errors import Unavailable
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.llm.breaker import BreakerState, BreakerView
from docllm.domain.llm.ports import LlmBreaker
from docllm.domain.review.ports import DocumentReviewer
from docllm.domain.tasks.verdict import Facts
from docllm.runtime.port_calls import PortCalls

Via = Callable[..., Awaitable[Any]]  # PortCalls.call or .claim


class LlmGate:
    def __init__(
        self,
        reviewer: DocumentReviewer,
        breaker: LlmBreaker,
        calls: PortCalls,
        worker_id: str,
        logger: logging.Logger,
        events: EventSink | None = None,
        poll_seconds: float = 1.0,
        open_poll_seconds: float = 5.0,
        base: float = 1.0,
        cap: float = 60.0,
    ):
        self.reviewer, self.breaker, self.calls, self.worker_id = reviewer, breaker, calls, worker_id
        self.logger, self.events = logger, events or NullEvents()
        self.poll, self.open_poll = poll_seconds, open_poll_seconds
        self.backoff = Backoff(base, cap)
        self.view: BreakerView | None = None
        self.seen_at = float("-inf")  # event-loop time of ``view``
        self.local_error: str | None = None  # this process's own check failed: it claims nothing
        self.local_until = 0.0
        self.unrecorded = 0  # successes not yet sent to the breaker
        self.recording: asyncio.Task[None] | None = None  # sends them, one call at a time

    @property
    def open(self) -> bool:
        """This process may claim, as far as it knows without asking Redis."""
        return self.local_error is None and (self.view is None or self.view.claims)

    # -- the dispatcher ----------------------------------------------------------------------
    async def pause(self) -> float:
        """0 when the dispatcher may claim now, else how long to wait before asking again. Its
        Redis calls take the claim path (``PortCalls.claim``): when a burst of answers arrives,
        the shared port threads hold the burst's end writes, and a look at the breaker queued
        behind them held every next claim back until the whole burst was written."""
        loop = asyncio.get_running_loop()
        view = await self._look(fresh=False, via=self.calls.claim)
        # A process whose own check failed probes only once its backoff is over: a host cut off
        # from the LLM would otherwise keep the fleet's breaker open with every probe it takes.
        if view is not None and view.state is BreakerState.half_open and self.local_until <= loop.time():
            view = await self._probe(via=self.calls.claim)
        if view is not None and not view.claims:
            # Open: look again at the next probe's time, or sooner (another process's probe may
            # close it first); half-open with someone else probing: soon.
            due = (view.probe_at_ms - view.now_ms) / 1000 if view.probe_at_ms is not None else 0.0
            return min(self.open_poll, max(self.poll, due))
        if self.local_error is None:
            return 0.0
        if self.local_until > loop.time():
            return self.local_until - loop.time()
        if await self._check():
            self.logger.warning("the LLM answers again, claiming resumed")
            self.local_error = None
            self.backoff.reset()
            await self._record(True, via=self.calls.claim)
            return 0.0
        await self._record(False, via=self.calls.claim)
        self.local_until = loop.time() + self.backoff.next()
        return self.local_until - loop.time()

    # -- an attempt's outcome ----------------------------------------------------------------
    def served(self) -> None:
        """The provider answered a review (whatever the answer said about the document). Recorded
        in the background: the attempt's commit must not wait on Redis for it (a worker cut off
        from Redis must still reach its fenced commit, which goes to the database). One call at a
        time per process, carrying every success since the previous one: a script per attempt
        would cost a busy worker a share of its CPU that grows with its concurrency."""
        self.unrecorded += 1
        if self.recording is None or self.recording.done():
            self.recording = asyncio.get_running_loop().create_task(self._record_served(), name="breaker-served")

    async def _record_served(self) -> None:
        while self.unrecorded:
            count, self.unrecorded = self.unrecorded, 0
            try:
                self._saw(await self.calls.call(self.breaker.record, True, count))
            except Unavailable:
                return  # lost with Redis: the window's counts, nothing more

    async def judge(self, facts: Facts) -> Facts:
        """What ``decide`` needs about a provider failure or refusal: this host's own check, whether
        the provider served anyone since the failure, and the fleet's breaker. A failure this host
        alone sees (its check fails while others are served) is not the fleet's: it is kept out of
        the breaker, so a cut-off host cannot open it for everyone. When the check fails this
        process stops claiming and checks again with backoff; nothing it holds is charged."""
        loop = asyncio.get_running_loop()
        before = await self._look(fresh=True)
        failed_at = before.now_ms if before is not None else None
        host_ok = await self._check()
        after = await self._look(fresh=True)
        served = failed_at is not None and after is not None and (after.last_ok_ms or -1) > failed_at
        view = after
        if host_ok or not served:
            view = await self._record(False) or after
        if host_ok:
            view = await self._record(True) or view
        elif self.local_error is None:
            self.logger.warning("the LLM fails for this process, stopped claiming: %s", facts.error)
            self.local_error, self.local_until = facts.error, loop.time() + self.backoff.next()
        return facts.judged(breaker_open=view is not None and not view.claims, served_since=served, host_ok=host_ok)

    # -- Redis and the probe -----------------------------------------------------------------
    async def _look(self, fresh: bool, via: Via | None = None) -> BreakerView | None:
        """The fleet's breaker as last seen, looked at again when ``fresh`` or older than a poll;
        ``via``: the port-call path (the shared threads unless said)."""
        loop = asyncio.get_running_loop()
        if not fresh and self.view is not None and not self.view.claims:
            fresh = True  # the dispatcher waited for it: always look again
        if fresh or self.view is None or loop.time() - self.seen_at >= self.poll:
            try:
                self._saw(await (via or self.calls.call)(self.breaker.view))
            except Unavailable:
                return self.view  # Redis is down: the claim finds out and backs off
        return self.view

    async def _record(self, ok: bool, via: Via | None = None) -> BreakerView | None:
        try:
            return self._saw(await (via or self.calls.call)(self.breaker.record, ok))
        except Unavailable:
            return None

    async def _probe(self, via: Via) -> BreakerView | None:
        try:
            if not await via(self.breaker.try_probe, self.worker_id):
                return self.view
            self._changed("probing", self.view)
            ok = await self._check()
            if not ok and self.local_error is not None:
                self.local_until = asyncio.get_running_loop().time() + self.backoff.next()
            return self._saw(await via(self.breaker.probe_result, self.worker_id, ok))
        except Unavailable:
            return self.view

    async def _check(self) -> bool:
        try:
            await self.reviewer.check()
        except Exception as exc:  # noqa: BLE001 - any failure of the probe says "not yet"
            self.logger.debug("LLM check failed: %s", exc)
            return False
        return True

    def _saw(self, view: BreakerView) -> BreakerView:
        before = self.view.state if self.view is not None else BreakerState.closed
        self.view, self.seen_at = view, asyncio.get_running_loop().time()
        if view.changed:
            self._changed(view.changed, view)
        if view.state is not before:
            self.events.emit(ev.BREAKER_SEEN, state=view.state.value, worker=self.worker_id)
            if view.state is BreakerState.closed and self.local_error is not None:
                # Another process's probe passed: check this one's own link at once, rather than
                # claim on its word (a host cut off from the LLM would claim and fail again).
                self.local_until = min(self.local_until, asyncio.get_running_loop().time())
        return view

    def _changed(self, change: str, view: BreakerView | None) -> None:
        fields: dict[str, object] = {"change": change, "worker": self.worker_id}
        if view is not None:
            fields.update(calls=view.calls, failures=view.failures, open_s=round(view.open_seconds_now(), 1))
        self.events.emit(ev.BREAKER, **fields)
