"""Whether the fleet's spend budget lets this process claim (I14; domain/llm/budget.py). The spend
itself is reserved and settled by the spend ledger (domain/llm/spend_ledger.py, I16).

The dispatcher asks ``pause`` before each claim, beside the LLM gate's: the view it answers from
is at most ``poll`` seconds old, and while today's spend and the reservations in flight reach the
cap it asks Redis every ``poll``, so claims stop within ``poll`` plus one round trip of the
crossing (whoever made it) and resume as soon as the cap is raised (``docllm budget set``), holds
are settled below it, or the authority's day rolls over. Tasks not claimed stay pending,
uncharged. An attempt whose reservation the ledger refused (``refused``) holds claims until the
room under the cap grows (a hold settled below its estimate, or released), the cap or the day
changes, or ``REFUSED_PAUSE_S`` passed: the cap had room, but not for the document it was asked
for, and a claim meanwhile would most likely be handed back the same way.
"""

from __future__ import annotations

import asyncio
import logging

from docllm.domain import events as ev
from docllm.domain.errors import Unavailable
from docllm.domain.events import EventSink, NullEvents
from docllm.domain.llm.budget import BudgetView
from docllm.domain.llm.ports import SpendBudget
from docllm.domain.llm.spend_ledger import room_of
from docllm.runtime.port_calls import PortCalls

POLL_SECONDS = 0.25  # how old a view may be when the dispatcher claims on it
REFUSED_PAUSE_S = 60.0  # after a refused reservation, claims wait for more room at most this long


class BudgetGate:
    def __init__(
        self,
        budget: SpendBudget,
        calls: PortCalls,
        logger: logging.Logger,
        events: EventSink | None = None,
        poll_seconds: float = POLL_SECONDS,
        unpriced: tuple[str, ...] = (),
    ):
        self.budget, self.calls, self.logger = budget, calls, logger
        # Deployments without a price: their spend cannot be counted, so no claims while any cap
        # is in force (a cap set with `docllm budget set`: the settings' caps refuse them at start).
        self.unpriced = unpriced
        self.events, self.poll = events or NullEvents(), poll_seconds
        self.view: BudgetView | None = None
        self.seen_at = float("-inf")  # event-loop time of ``view``
        self.refused_until = float("-inf")  # event-loop time claims wait for more room at most until
        self.refused_at: tuple[int, int | None, int] | None = None  # (day, cap, room) when refused

    async def pause(self) -> float:
        """0 when the dispatcher may claim now, else how long to wait before asking again."""
        loop = asyncio.get_running_loop()
        if self.view is None or not self._claims(self.view) or self.waiting or loop.time() - self.seen_at >= self.poll:
            try:
                self._saw(await self.calls.claim(self.budget.view))  # the claim path (see LlmGate.pause)
            except Unavailable:
                pass  # Redis is down: the claim finds out and backs off
        if self.waiting:
            return self.poll
        return self.poll if self.view is not None and not self._claims(self.view) else 0.0

    def _claims(self, view: BudgetView) -> bool:
        return view.claims and not (self.unpriced and view.cap_micro is not None)

    @property
    def waiting(self) -> bool:
        """After a refusal: no more room yet, the same cap and day, and not past REFUSED_PAUSE_S."""
        if self.refused_at is None:
            return False
        if asyncio.get_running_loop().time() >= self.refused_until or self.view is None:
            self.refused_at = None
            return False
        day, cap, room = self.refused_at
        if (self.view.day, self.view.cap_micro) != (day, cap) or room_of(self.view) > room:
            self.refused_at = None
            return False
        return True

    def refused(self) -> None:
        """The ledger refused an attempt's reservation at a daily cap."""
        self.refused_until = asyncio.get_running_loop().time() + REFUSED_PAUSE_S
        if self.view is not None:
            self.refused_at = (self.view.day, self.view.cap_micro, room_of(self.view))

    def _saw(self, view: BudgetView) -> None:
        before = self.view
        self.view, self.seen_at = view, asyncio.get_running_loop().time()
        if before is None or before.full != view.full or before.cap_micro != view.cap_micro:
            if self.unpriced and view.cap_micro is not None:
                self.logger.error(
                    "a spend cap of %.6f USD is in force (%s) but deployment %s has no price, so its spend "
                    "cannot be counted: claims stopped; give it prices (or DOCLLM_LLM_PRICES)",
                    view.cap_usd or 0.0,
                    view.source,
                    ", ".join(repr(name) for name in self.unpriced),
                )
            elif view.full:
                self.logger.warning(
                    "spend cap reached: %.6f spent and %.6f held of %.6f USD today (%s); claims stopped",
                    view.spent_usd,
                    view.held_usd,
                    view.cap_usd or 0.0,
                    view.source,
                )
            elif before is not None and before.full:
                self.logger.warning("spend under the cap again (%s), claiming resumed", view.source)
        self.events.emit(
            ev.BUDGET_SEEN,
            spent_usd=view.spent_usd,
            cap_usd=view.cap_usd,
            over=view.over,
            source=view.source,
            by_deployment={name: view.deployment_usd(name) for name in view.by_deployment},
        )
