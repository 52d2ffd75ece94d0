"""How the runtime's parts are put together, in one place: ``Service`` (production) and the
simulation both build their worker, LLM gate and loop steps here, so the two cannot drift apart."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from docllm.domain.events import EventSink
from docllm.domain.llm.ports import LlmBreaker, SpendBudget
from docllm.domain.review.ports import DocumentReviewer
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from docllm.runtime.budget_gate import BudgetGate
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import PortCalls
from docllm.runtime.worker import Worker

Adapt = Callable[[Any, LlmGate], tuple[Any, Any]]  # (processor, gate) -> what the worker gets
Step = Callable[[], bool]


@dataclass
class Wiring:
    """How a ``Service`` reaches its ports and where it logs: production's defaults, or the
    simulation's (its port-call driver on virtual time, its trace's logger, its broken mechanisms)."""

    calls: PortCalls | None = None  # None: threads sized to the process's concurrency
    idle_wait_seconds: float = 1.0  # a dispatcher's blocking wait for work before it claims again
    logger: logging.Logger | None = None  # every part's logger; None: docllm.<part>
    adapt: Adapt | None = None  # wraps the worker's processor and LLM gate
    wrap_step: Callable[[str, Step], Step] | None = None  # wraps a loop's step (by the loop's name)

    def step(self, name: str, step: Step) -> Step:
        return self.wrap_step(name, step) if self.wrap_step is not None else step

    def log(self, part: str) -> logging.Logger:
        return self.logger or logging.getLogger(f"docllm.{part}")


def build_worker(
    processor: Any,
    reviewer: DocumentReviewer,
    breaker: LlmBreaker,
    calls: PortCalls,
    worker_id: str,
    concurrency: int,
    breaker_open_seconds: float,
    events: EventSink | None = None,
    wiring: Wiring | None = None,
    budget: SpendBudget | None = None,
    linger_s: float = 0.005,
) -> Worker:
    """The worker and its LLM gate (and its spend gate, with a ``budget``). A process whose own LLM
    check fails backs off no longer than the fleet's breaker stays open (``breaker_open_seconds``);
    its reports' commits wait ``linger_s`` at most to form a group (``DOCLLM_STORE_LINGER_MS``)."""
    w = wiring or Wiring()
    gate: Any = LlmGate(reviewer, breaker, calls, worker_id, w.log("llm"), events, cap=breaker_open_seconds)
    if w.adapt is not None:
        processor, gate = w.adapt(processor, gate)
    ledger = getattr(processor, "ledger", None)
    unpriced = ledger.unpriced if ledger is not None else ()
    spend = BudgetGate(budget, calls, w.log("budget"), events, unpriced=unpriced) if budget is not None else None
    log = w.log("worker")
    return Worker(processor, calls, gate, concurrency, w.idle_wait_seconds, log, budget=spend, linger_s=linger_s)


def reap_step(reaper: Reaper, on_reaped: Callable[[int], None] | None = None) -> Callable[[], bool]:
    """One reaper cycle; True (go again at once) when it settled a full batch: more may be waiting."""

    def step() -> bool:
        settled = reaper.reap_once()
        if on_reaped is not None:
            on_reaped(settled)
        return settled >= reaper.batch

    return step


def reconcile_step(reconciler: Reconciler) -> Callable[[], bool]:
    """One reconciler cycle; it never asks to go again at once (it runs at a low rate, D10)."""

    def step() -> bool:
        reconciler.reconcile_once()
        return False

    return step


class Keeps(Protocol):
    def keep(self) -> None: ...


def keep_step(part: Keeps) -> Step:
    """The batch lane's lease renewals (``Batcher.keep``, ``BatchPoller.keep``) as a loop step,
    beside the part's own step: a long upload or apply never outlives the leases it holds."""

    def step() -> bool:
        part.keep()
        return False

    return step


def batcher_tick(max_wait_seconds: float, batch_lease_seconds: float) -> float:
    """How often the batcher claims: often enough that a batch leaves within a small share of
    DOCLLM_BATCH_MAX_WAIT_SECONDS of its oldest claim, at most once a second, never slower than
    the batch lease."""
    return max(0.05, min(1.0, max_wait_seconds / 10, batch_lease_seconds))
