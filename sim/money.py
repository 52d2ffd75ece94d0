"""The spend ledger in the simulation (issue 43, I16; scenario ``money``): the fleet's spend
budget as the product builds it (``RedisSpendBudget``: ``budget.lua`` on the run's fakeredis and
authority clock), through Redis's outages, watched.

SPEND, checked after every call of the budget and at the end:

- the cap: the day's counted spend and every reservation in flight never pass the cap in force by
  more than the settlements that counted more than their reservation held (an answer dearer than
  its estimate). Both the realtime lane and the batch lane reserve before the provider is asked,
  so neither can spend past the cap on a count that stood still;
- the books: the spend counted over the run never exceeds what the rows' writes that landed
  recorded (``cost_usd``, the usage each write carried): a write counted twice (two pollers
  applying one batch) shows here. Below it by what was never settled: a process killed between
  its write and its settlement, as the trace shows (not checked: that is the ledger's stated limit).

The operator raises the cap when the faults stop (``docllm budget set``), so the run drains (I2).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.domain.llm.budget import MICRO, BudgetView, Grant, Settle, day_of
from sim.observers import Gate

DRAIN_CAP_USD = 1_000_000.0  # what the operator sets when the faults stop


class WatchedBudget:
    """The SpendBudget port, recording what each key reserved and what each settlement counted."""

    def __init__(self, budget: Any, watch: MoneyWatch):
        self._budget, self._watch = budget, watch

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._budget, attr)

    def reserve(self, key: str, deployment: str, micro_usd: int, hold_ms: int, deployment_cap: int | None) -> Grant:
        grant: Grant = self._budget.reserve(key, deployment, micro_usd, hold_ms, deployment_cap)
        if grant.granted:
            self._watch.reserved[key] = max(self._watch.reserved[key], micro_usd)
        else:
            self._watch.refused += 1
            self._watch.refused_keys.append(key)
        self._watch.check(grant.view)
        return grant

    def settle(self, items: Sequence[Settle]) -> BudgetView:
        view: BudgetView = self._budget.settle(items)
        w = self._watch
        for item in items:
            w.settles += len(item.by_deployment)  # a micro-dollar of rounding per share at most
            counted = sum(item.by_deployment.values())
            w.counted_total += counted
            key = item.key or ""
            before = max(0, w.counted[key] - w.reserved[key]) if key else 0
            w.counted[key] += counted
            after = max(0, w.counted[key] - w.reserved[key]) if key else counted
            w.over_estimate[view.day] += after - before
        w.check(view)
        return view

    def view(self) -> BudgetView:
        view: BudgetView = self._budget.view()
        self._watch.check(view)
        return view


class MoneyWatch:
    def __init__(self, system: Any):
        self.sys = system
        s = system.settings
        budget = RedisSpendBudget(system.client, s.queue_prefix, system.clock, s.spend_cap_usd_per_day)
        brk = system.brk
        wrapped = brk.wrap_budget(budget) if brk is not None else budget
        self.raw = budget
        self.port = Gate(WatchedBudget(wrapped, self), system.down, "redis", system.ledger)
        self.reserved: defaultdict[str, int] = defaultdict(int)  # key -> micro-dollars it held
        self.counted: defaultdict[str, int] = defaultdict(int)  # key -> micro-dollars settled on it
        self.over_estimate: defaultdict[int, int] = defaultdict(int)  # day -> counted beyond holds
        self.counted_total = 0
        self.refused = 0
        self.refused_keys: list[str] = []
        self.settles = 0  # shares counted

    def check(self, view: BudgetView) -> None:
        """SPEND's cap, on what the script answered."""
        if view.cap_micro is None:
            return
        allowed = view.cap_micro + self.over_estimate[view.day]
        if view.spent_micro + view.held_micro > allowed:
            self.sys.ledger.violate(
                "SPEND",
                None,
                f"spent {view.spent_micro / MICRO:.6f} + held {view.held_micro / MICRO:.6f} USD today is over the "
                f"cap of {view.cap_micro / MICRO:.6f} (+{self.over_estimate[view.day] / MICRO:.6f} counted "
                "beyond reservations)",
                key=("cap", view.day),
            )

    def heal(self) -> None:
        """The operator raises the cap as the faults stop: what waited at it drains."""
        self.raw.set_cap(DRAIN_CAP_USD)
        self.sys.world.log("note", f"operator: docllm budget set --usd {DRAIN_CAP_USD:g}")

    def final(self) -> None:
        """SPEND's books: never more counted than the rows' writes recorded."""
        rows = sum(round((t.usage.cost_usd or 0.0) * MICRO) for t in self.sys.real_repo.recent(1_000_000) if t.usage)
        slack = self.settles + 10  # a micro-dollar of rounding per share counted at most
        if self.counted_total > rows + slack:
            self.sys.ledger.violate(
                "SPEND",
                None,
                f"{self.counted_total / MICRO:.6f} USD counted, but the rows' writes that landed record "
                f"{rows / MICRO:.6f}: spend counted for writes that did not land",
                key="books",
            )
        today = day_of(self.sys.clock.now_ms())
        self.sys.world.log(
            "note",
            f"spend: {self.counted_total / MICRO:.6f} USD counted, rows {rows / MICRO:.6f}, {self.refused} "
            f"reservation(s) refused, day {today}",
        )
