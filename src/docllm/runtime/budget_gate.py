"""Whether the fleet's spend budget lets this process claim (I14; domain/budget.py), and the
spend of its attempts added to the fleet's count.

The dispatcher asks ``pause`` before each claim, beside the LLM gate's: the view it answers from
is at most ``poll`` seconds old, and while the cap is reached it asks Redis every ``poll``, so
claims stop within ``poll`` plus one round trip of the crossing (whoever made it) and resume as
soon as the cap is raised (``docllm budget set``) or the authority's day rolls over. Tasks not
claimed stay pending, uncharged. Spend is sent in the background, one call at a time carrying
all that ended since the last (and each deployment's share of it): an attempt's fenced write
never waits on Redis for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from docllm.domain import events as ev
from docllm.domain.budget import MICRO, BudgetView, micro
from docllm.domain.errors import Unavailable
from docllm.domain.events import NullEvents
from docllm.domain.ports import EventSink, SpendBudget
from docllm.runtime.port_calls import PortCalls

POLL_SECONDS = 0.25  # how old a view may be when the dispatcher claims on it


class BudgetGate:
    def __init__(
        self,
        budget: SpendBudget,
        calls: PortCalls,
        logger: logging.Logger,
        events: EventSink | None = None,
        poll_seconds: float = POLL_SECONDS,
    ):
        self.budget, self.calls, self.logger = budget, calls, logger
        self.events, self.poll = events or NullEvents(), poll_seconds
        self.view: BudgetView | None = None
        self.seen_at = float("-inf")  # event-loop time of ``view``
        self.unsent_usd = 0.0  # spend of ended attempts not yet added to the fleet's count
        self.unsent_by: dict[str, float] = {}  # its shares per deployment (name -> USD)
        self.sending: asyncio.Task[None] | None = None

    async def pause(self) -> float:
        """0 when the dispatcher may claim now, else how long to wait before asking again."""
        loop = asyncio.get_running_loop()
        if self.view is None or not self.view.claims or loop.time() - self.seen_at >= self.poll:
            try:
                self._saw(await self.calls.claim(self.budget.view))  # the claim path (see LlmGate.pause)
            except Unavailable:
                pass  # Redis is down: the claim finds out and backs off
        return self.poll if self.view is not None and not self.view.claims else 0.0

    def spent(self, usd: float | None, by_deployment: Mapping[str, float] | None = None) -> None:
        """An attempt ended having spent ``usd`` (None: unpriced), ``by_deployment`` of it at each."""
        if not usd:
            return
        self.unsent_usd += usd
        for name, share in (by_deployment or {}).items():
            self.unsent_by[name] = self.unsent_by.get(name, 0.0) + share
        if self.sending is None or self.sending.done():
            self.sending = asyncio.get_running_loop().create_task(self._send(), name="budget-spent")

    async def _send(self) -> None:
        while micro(self.unsent_usd):
            amount = micro(self.unsent_usd)
            shares = {name: micro(usd) for name, usd in self.unsent_by.items() if micro(usd)}
            self._move(-1, amount, shares)  # being sent
            try:
                self._saw(await self.calls.call(self.budget.add, amount, shares))
            except Unavailable:
                self._move(1, amount, shares)  # back: sent with the next attempt's spend
                return

    def _move(self, sign: int, amount: int, shares: Mapping[str, int]) -> None:
        """Micro-dollars out of (-1) or back into (+1) what is still to send."""
        self.unsent_usd += sign * amount / MICRO
        for name, share in shares.items():
            self.unsent_by[name] = self.unsent_by.get(name, 0.0) + sign * share / MICRO

    def _saw(self, view: BudgetView) -> None:
        before = self.view
        self.view, self.seen_at = view, asyncio.get_running_loop().time()
        if before is None or before.over != view.over or before.cap_micro != view.cap_micro:
            if view.over:
                self.logger.warning(
                    "spend cap reached: %.6f of %.6f USD today (%s); claims stopped",
                    view.spent_usd,
                    view.cap_usd or 0.0,
                    view.source,
                )
            elif before is not None and before.over:
                self.logger.warning("spend under the cap again (%s), claiming resumed", view.source)
        self.events.emit(
            ev.BUDGET_SEEN,
            spent_usd=view.spent_usd,
            cap_usd=view.cap_usd,
            over=view.over,
            source=view.source,
            by_deployment={name: view.deployment_usd(name) for name in view.by_deployment},
        )
