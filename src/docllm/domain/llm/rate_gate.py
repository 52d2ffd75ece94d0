"""The turn of one LLM request under the fleet's rate limits (ARCHITECTURE.md, LLM boundary).

A reviewer asks ``async with gate.request(tokens) as ticket:`` around each request: the gate waits
(``asyncio.sleep``, so the attempt keeps its lease, its heartbeats go on and cancelling it cancels
the wait) until the limiter charges the request, and settles it once the answer came: the usage
it reports corrects the estimate, the provider's hints tighten the limit for every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from docllm.domain.llm.ports import RateLimiter
from docllm.domain.llm.rate_limits import ProviderHints
from docllm.domain.llm.usage import held

Run = Callable[..., Awaitable[Any]]  # runs a blocking port call off the event loop

# Ask again at least this often: another worker's refund or a provider reset may come sooner.
MAX_SLEEP_S = 5.0


class OverBudget(Exception):
    """The request's turn is further away than the caller may wait (``request(max_wait=...)``):
    nothing was charged, and a router sends it elsewhere (ARCHITECTURE.md, Deployments)."""

    def __init__(self, wait: float):
        super().__init__(f"the rate limit's next turn is {wait:.1f} s away")
        self.wait = wait


@dataclass
class Ticket:
    """One charged request: the reviewer fills in what the answer said."""

    charged: int
    used: int | None = None  # prompt + completion tokens the answer reports
    hints: ProviderHints = ProviderHints()


class RateGate:
    def __init__(self, limiter: RateLimiter, run: Run | None = None, on_wait: Callable[[float], None] | None = None):
        self._limiter = limiter
        self._run: Run = run or asyncio.to_thread
        self._on_wait = on_wait  # seconds each request waited for its turn (a metric)

    @asynccontextmanager
    async def request(self, tokens: int, max_wait: float | None = None) -> AsyncIterator[Ticket]:
        await self._turn(tokens, max_wait)
        ticket = Ticket(tokens)
        try:
            yield ticket
        except asyncio.CancelledError:
            raise  # not settled: its estimate stays charged
        except BaseException:
            await self._settle(ticket)  # a 429's Retry-After matters most
            raise
        await self._settle(ticket)

    async def _settle(self, ticket: Ticket) -> None:
        """Advice for the fleet: when Redis cannot take it, the answer (or the request's own
        error) still stands, and the estimate stays charged."""
        delta = 0 if ticket.used is None else ticket.used - ticket.charged
        if delta or ticket.hints:
            with contextlib.suppress(Exception):
                await self._run(self._limiter.settle, delta, ticket.hints)

    async def _turn(self, tokens: int, max_wait: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Only 0 is a turn: a strange wait (negative, NaN, inf: a limiter's overflow) is asked again later.
        while (wait := await self._run(self._limiter.acquire, tokens)) != 0:
            if max_wait is not None and not loop.time() - started + wait <= max_wait:  # NaN too
                raise OverBudget(wait)
            with held(loop.time):  # not the attempt's running time (I12)
                await asyncio.sleep(wait if 0 < wait <= MAX_SLEEP_S else MAX_SLEEP_S)
        if self._on_wait is not None:
            self._on_wait(loop.time() - started)

    def headroom(self) -> dict[str, Any]:
        return self._limiter.headroom()


class NoGate:
    """No limits configured: every request goes at once."""

    @asynccontextmanager
    async def request(self, tokens: int, max_wait: float | None = None) -> AsyncIterator[Ticket]:
        yield Ticket(tokens)
