"""The ports of the LLM's shared limits: the circuit breaker, the rate limiter, the spend budget.

Every time in these signatures is the authority's time (the Redis server's clock, ARCHITECTURE.md,
Clocks) in milliseconds; no port takes or returns a worker's wall clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from docllm.domain.llm.breaker import BreakerView
from docllm.domain.llm.budget import BudgetView, Grant, Settle
from docllm.domain.llm.rate_limits import ProviderHints


class LlmBreaker(Protocol):
    """The fleet's circuit breaker on the LLM provider (ARCHITECTURE.md, LLM boundary), shared by every process
    and decided on the authority clock: outcomes of LLM calls go into a time window; a failure
    ratio over it opens the breaker; after the open interval it is half-open, and one probe lease
    at a time may test the provider; a probe that passes closes it."""

    def record(self, ok: bool, count: int = 1) -> BreakerView:
        """Count ``count`` outcomes (``ok``: the provider served; not ok: it failed for provider
        reasons) and return the state after them; a failure may open it."""

    def view(self) -> BreakerView:
        """The state now; open becomes half-open once the open interval has passed."""

    def try_probe(self, worker_id: str) -> bool:
        """Take the one probe lease (half-open only, and only while nobody else holds it)."""

    def probe_result(self, worker_id: str, ok: bool) -> BreakerView:
        """The probe of ``worker_id`` answered: closed when it passed, open for another interval when
        not. A process without the lease changes nothing."""


class RateLimiter(Protocol):
    """The fleet's share of one LLM's rate limits (``domain.llm.rate_limits``), on the authority clock."""

    def acquire(self, tokens: int) -> float:
        """Charge one request estimated at ``tokens``: 0 when it may go now, else the seconds to
        wait before asking again (and nothing is charged)."""

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        """Correct the charge by what the answer used (``delta_tokens`` = used - charged) and take
        what the provider said about its limits, for everyone."""

    def headroom(self) -> dict[str, Any]:
        """A flat view of what could be sent now (``docllm stats``)."""


class SpendBudget(Protocol):
    """The fleet's LLM spend today against its cap (``domain.llm.budget``, I14), on the authority clock."""

    def add(self, micro_usd: int, by_deployment: Mapping[str, int] | None = None) -> BudgetView:
        """Add what attempts spent to today's count, and each deployment's share (name ->
        micro-dollars) to its own, in one atomic step; the view after it."""

    def view(self) -> BudgetView:
        """Today's spend, what is held, and the cap in force."""

    def reserve(self, key: str, deployment: str, micro_usd: int, hold_ms: int, deployment_cap: int | None) -> Grant:
        """Hold ``micro_usd`` under ``key`` at ``deployment`` for at most ``hold_ms``, in one atomic
        step, only when it fits under the fleet's cap and ``deployment_cap`` (micro-dollars; None:
        none) beside today's spend and every hold (``domain/llm/spend_ledger.py``, I16). A key held
        already is granted again, unchanged."""

    def settle(self, items: Sequence[Settle]) -> BudgetView:
        """Count each item's spend (today, and each deployment's share) and take it off its key's
        hold, releasing what is left when the item says so; one atomic step."""

    def set_cap(self, usd: float | None) -> BudgetView:
        """The fleet's cap, over every process's setting (0: no cap); None: back to the settings."""
