"""The spend ledger (I16, docs/RELIABILITY.md, "The spend ledger"): the one place LLM money is
decided, for the realtime reviewers (one deployment or the router over several) and the batch lane.

- **Reserve before the provider is asked.** A realtime attempt reserves its document's estimate
  before its first request (``reserve_attempt``, at the deployment its chunks go to first); a
  batch reserves the sum of its lines' estimates after it is recorded and before its upload
  (``reserve_batch``). ``reserve`` is the one check of every cap: the per-task cap on the
  estimate alone (pure, ``ledger.check_task_cap``), then the fleet's daily cap and the
  deployment's own in one Redis script on the authority clock, where the reservation is held only
  when today's spend, every hold and this one fit under both.
- **Settle from what the provider reported, once per write that landed.** An attempt's spend
  (its meter: the usage each answer reported, priced) is counted when its fenced write lands
  (``settle``, called by ``TaskProcessor`` with what the store said of *this* write), taken off
  its hold, and the rest of the hold released; a write that did not land counts nothing and only
  releases. A batch's members settle one by one as their commits land (their cost at batch prices,
  under the batch's deployment), each taken off the batch's hold, and the batch's hold goes when it
  is applied or returned (``release``).
- **Holds lapse.** A hold carries a deadline (an attempt's: twice its runtime bound and two
  leases; a batch's: its processing bound): a process that dies holding one does not hold the cap
  for ever.

Settles that cannot reach Redis are kept and sent with the next one (at most ``MAX_UNSENT``): a
write that landed is counted once Redis answers again.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from docllm.domain.errors import SpendCapReached, Unavailable
from docllm.domain.llm.budget import BudgetView, Grant, Settle, micro
from docllm.domain.llm.ledger import (
    Priced,
    attempt_key,
    batch_key,
    check_task_cap,
    document_requests,
    lines_requests,
)
from docllm.domain.llm.ports import SpendBudget
from docllm.domain.review.rubric import Rubric

MAX_UNSENT = 10_000  # settles kept while Redis does not answer (then the oldest are dropped)
REFUSED_RETRY_S = 60.0  # a refused attempt is handed back for this long: the cap is not freed at once


class SpendLedger:
    def __init__(
        self,
        budget: SpendBudget | None,
        deployments: Sequence[Priced],
        task_cap_usd: float | None = None,
        max_chunk_chars: int = 12000,
        attempt_hold_ms: int = 3_600_000,
    ):
        """``budget``: the Redis side (None: spend is not counted, only the per-task cap holds);
        ``deployments``: every deployment realtime may use, in the router's order."""
        self.budget = budget
        self.deployments = {d.name: d for d in deployments}
        self.first = min(deployments, key=lambda d: d.order) if deployments else None
        self.task_cap_usd = task_cap_usd or None
        self.max_chunk_chars, self.attempt_hold_ms = max_chunk_chars, attempt_hold_ms
        self._unsent: list[Settle] = []
        self._lock = threading.Lock()

    @property
    def unpriced(self) -> tuple[str, ...]:
        """The deployments whose spend cannot be counted (no price): no work while a cap is in force."""
        return tuple(name for name, d in self.deployments.items() if d.price is None)

    @property
    def reserves(self) -> bool:
        """Whether a realtime attempt has anything to reserve or check: its first deployment is
        priced, and spend is counted or a per-task cap is set (else no work, no port call)."""
        first = self.first
        return first is not None and first.price is not None and (self.budget is not None or bool(self.task_cap_usd))

    # -- the one place a cap is checked --------------------------------------------------------
    def reserve(
        self, key: str, where: Priced, usd: float | None, task_usd: float | None, what: str, hold_ms: int
    ) -> Grant | None:
        """Check the per-task cap on ``task_usd``, then hold ``usd`` at ``where`` under the fleet's
        and the deployment's caps. None: nothing to hold (no budget, or unpriced)."""
        check_task_cap(task_usd, self.task_cap_usd, what)
        if self.budget is None or usd is None:
            return None
        cap = micro(where.cap_usd) if where.cap_usd else None
        return self.budget.reserve(key, where.name, micro(usd), hold_ms, cap)

    # -- realtime ------------------------------------------------------------------------------
    def reserve_attempt(
        self, task_id: int, attempt: int, task_name: str, document: str, rubric: Rubric | None
    ) -> tuple[str, str] | None:
        """Reserve a realtime attempt's document before its first request: (key, deployment) held,
        or None (nothing held). The per-task cap is checked at the dearest deployment the router
        may send a chunk to (the only one, for one deployment): OverCostCap over it. The hold is at
        the first deployment by order; a chunk the router sends elsewhere reserves there first
        (``Purse.cover``). SpendCapReached at the fleet's cap, or at the first deployment's own cap
        when it is the only one (with several, its chunks go to the others, each reserved there)."""
        where = self.first
        if where is None or not self.reserves:
            return None
        requests = document_requests(task_name, document, rubric, self.max_chunk_chars)
        usd = where.cost(requests)
        dearest, task_usd = where, usd
        for other in self.deployments.values():
            cost = other.cost(requests)
            if cost is not None and task_usd is not None and cost > task_usd:
                dearest, task_usd = other, cost
        what = f"{len(requests)} chunk(s) of {dearest.model} at {dearest.name}"
        key = attempt_key(task_id, attempt)
        grant = self.reserve(key, where, usd, task_usd, what, self.attempt_hold_ms)
        if grant is None:
            return None
        if not grant.granted:
            if grant.refused_by == "deployment" and len(self.deployments) > 1:
                return None
            raise SpendCapReached(refusal(grant, where, usd), REFUSED_RETRY_S)
        return key, where.name

    # -- the batch lane ------------------------------------------------------------------------
    def check_lines(self, where: Priced, lines: Sequence[Mapping[str, Any]]) -> float | None:
        """One member's lines at ``where`` (its batch prices): their estimate, after the per-task
        cap (OverCostCap over it)."""
        usd = where.cost(lines_requests(lines))
        check_task_cap(usd, self.task_cap_usd, f"{len(lines)} chunk(s) of {where.model} at batch prices")
        return usd

    def reserve_batch(self, ref: str, where: Priced, usd: float | None, hold_ms: int) -> Grant | None:
        """Hold a batch's estimate from before its upload until it is applied or returned (its
        members' per-task caps were checked by ``check_lines``)."""
        return self.reserve(batch_key(ref), where, usd, None, "a batch", hold_ms)

    # -- settle --------------------------------------------------------------------------------
    def settle(self, items: Sequence[Settle]) -> BudgetView | None:
        """Count and release (see the module's docstring); a Redis that does not answer keeps them
        for the next call."""
        if self.budget is None:
            return None
        with self._lock:
            items = [*self._unsent, *(i for i in items if i.key or i.by_deployment)]
            self._unsent = []
        if not items:
            return None
        try:
            return self.budget.settle(items)
        except Unavailable:
            with self._lock:
                self._unsent = (items + self._unsent)[-MAX_UNSENT:]
            return None

    def release(self, key: str) -> None:
        self.settle([Settle(key, True, {})])

    def view(self) -> BudgetView | None:
        return None if self.budget is None else self.budget.view()


class Purse:
    """One running attempt's reservations, for a router that sends a chunk to a deployment the
    attempt's hold is not at: that chunk is reserved there first (its cap and the fleet's)."""

    def __init__(self, ledger: SpendLedger, attempt: Any):
        self.ledger, self.attempt = ledger, attempt

    def needs(self, deployment: str) -> bool:
        """Whether a chunk sent to ``deployment`` must be reserved there (pure: no port call)."""
        where = self.ledger.deployments.get(deployment)
        return (
            self.ledger.budget is not None
            and where is not None
            and where.price is not None
            and self.attempt.hold_at != deployment
        )

    def cover(self, deployment: str, requests: Sequence[Any]) -> bool:
        """Reserve one chunk's requests at ``deployment`` (blocking: a Redis call). False: refused
        at its cap or the fleet's; the router passes it over for this chunk."""
        where = self.ledger.deployments[deployment]
        a = self.attempt
        key = f"{attempt_key(a.task_id, a.number)}:{deployment}:{len(a.chunk_holds) + 1}"
        grant = self.ledger.reserve(key, where, where.cost(requests), None, "a chunk", self.ledger.attempt_hold_ms)
        if grant is not None and grant.granted:
            a.chunk_holds.append(key)
        return grant is None or grant.granted


_purse: contextvars.ContextVar[Purse | None] = contextvars.ContextVar("docllm_purse", default=None)


@contextmanager
def spending(purse: Purse | None) -> Iterator[None]:
    """The running attempt's purse for the reviews inside (their chunk tasks inherit it)."""
    token = _purse.set(purse)
    try:
        yield
    finally:
        _purse.reset(token)


def current_purse() -> Purse | None:
    return _purse.get()


def shares(by_deployment: Mapping[str, float], total_usd: float | None) -> dict[str, int]:
    """Micro-dollars per deployment of what a write spent; the part no deployment is named for
    under "" (the fleet's count alone)."""
    found = {name: micro(usd) for name, usd in by_deployment.items() if micro(usd) > 0}
    rest = micro(total_usd or 0.0) - sum(found.values())
    if rest > 0:
        found[""] = found.get("", 0) + rest
    return found


def room_of(view: BudgetView) -> int:
    """Micro-dollars left under the fleet's cap for new reservations (0 without a cap)."""
    return (view.cap_micro or 0) - view.spent_micro - view.held_micro


def refusal(grant: Grant, where: Priced, usd: float | None) -> str:
    v = grant.view
    if grant.refused_by == "deployment":
        spent, held = v.deployment_usd(where.name), v.held_by_deployment.get(where.name, 0) / 1_000_000
        cap = f"deployment {where.name}'s daily spend cap of {where.cap_usd or 0:g} USD"
    else:
        spent, held = v.spent_usd, v.held_usd
        cap = f"the fleet's daily spend cap of {v.cap_usd or 0:g} USD ({v.source})"
    return (
        f"spend cap reached: {usd or 0:.6f} USD does not fit under {cap} ({spent:.6f} spent today, "
        f"{held:.6f} held); handed back uncharged"
    )
