"""The fleet's spend budget (DESIGN I14, I16): what was spent on the LLM today and what is reserved,
on the authority clock, against a cap; and the estimate the reservations are made of.

Spend is kept in whole micro-dollars (an integer Redis can add atomically). The day is the
authority clock's UTC day (``day_of``): its key changes when the day does, so the count rolls
over on its own, and old days expire. The cap is the process's setting
(``DOCLLM_SPEND_CAP_USD_PER_DAY``) unless an operator set one for the fleet in Redis
(``docllm budget set``), which every process sees at its next look.

I14's bound: a dispatcher claims only while the last view it took (at most ``poll`` seconds old)
was under the cap, and spend is added as attempts end; so once the crossing is recorded no
attempt starts past the next look, and the overshoot is at most what was in flight then.

Each deployment's share of the day's spend (DOCLLM_LLM_DEPLOYMENTS; the single-URL settings are the
one deployment "default") is added in the same atomic step as the fleet's, kept for the same day
and expiring with it, against the deployment's own cap when it has one (``spend_cap_usd_per_day``).
How spend is reserved and settled is ``domain/llm/spend_ledger.py`` (the spend ledger, I16).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.rate_limits import COMPLETION_ESTIMATE_TOKENS, estimate_tokens

MICRO = 1_000_000  # micro-dollars per USD
DAY_MS = 86_400_000
KEEP_MS = 2 * DAY_MS  # a day's count outlives its day by one, for the operator's look back


def day_of(now_ms: int) -> int:
    """Days since the epoch on the authority clock (UTC)."""
    return now_ms // DAY_MS


def micro(usd: float) -> int:
    return max(0, round(usd * MICRO))


@dataclass(frozen=True)
class BudgetView:
    day: int
    spent_micro: int
    cap_micro: int | None  # None: no cap
    source: str  # where the cap comes from: "setting", "fleet" (set in Redis), or "off"
    by_deployment: Mapping[str, int] = field(default_factory=dict)  # name -> micro-dollars spent today
    held_micro: int = 0  # the spend ledger's reservations in flight (I16)
    held_by_deployment: Mapping[str, int] = field(default_factory=dict)  # name -> micro-dollars held

    @property
    def over(self) -> bool:
        """Spent at or past the cap."""
        return self.cap_micro is not None and self.spent_micro >= self.cap_micro

    @property
    def full(self) -> bool:
        """Spent and held at or past the cap: no reservation can be granted, so nothing is claimed (I14)."""
        return self.cap_micro is not None and self.spent_micro + self.held_micro >= self.cap_micro

    @property
    def claims(self) -> bool:
        return not self.full

    @property
    def spent_usd(self) -> float:
        return self.spent_micro / MICRO

    def deployment_usd(self, name: str) -> float:
        """What the deployment ``name`` spent today (0 when nothing was counted for it)."""
        return self.by_deployment.get(name, 0) / MICRO

    @property
    def cap_usd(self) -> float | None:
        return None if self.cap_micro is None else self.cap_micro / MICRO

    @property
    def held_usd(self) -> float:
        return self.held_micro / MICRO


@dataclass(frozen=True)
class Settle:
    """One settlement: what a write that landed spent (micro-dollars per deployment; "" for the
    fleet's count alone), taken off ``key``'s hold; ``release``: the rest of the hold goes too."""

    key: str | None
    release: bool = True
    by_deployment: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Grant:
    """The spend ledger's answer to one reservation: granted, or refused by which cap."""

    granted: bool
    refused_by: str  # "fleet", "deployment" or "" (granted)
    view: BudgetView


def cap_in_force(setting_usd: float, fleet_micro: int | None) -> tuple[int | None, str]:
    """The cap and where it comes from: the fleet's (Redis) over the setting; 0 is off."""
    if fleet_micro is not None:
        return (fleet_micro or None), ("fleet" if fleet_micro else "off")
    return (micro(setting_usd) or None), ("setting" if setting_usd > 0 else "off")


def estimated_cost(prices: PriceTable, model: str, requests: Iterable[Iterable[Mapping[str, object]]]) -> float | None:
    """USD the requests' messages would cost, by the rate limiter's estimate of their tokens
    (prompt by length, a fixed completion), priced by the one ``PriceTable.cost``."""
    prompt = completion = 0
    for messages in requests:
        prompt += estimate_tokens(messages) - COMPLETION_ESTIMATE_TOKENS
        completion += COMPLETION_ESTIMATE_TOKENS
    return prices.cost(model, prompt, completion)
