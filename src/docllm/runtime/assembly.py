"""How the runtime's parts are put together, in one place: ``Service`` (production) and the
simulation both build their worker, LLM gate and loop steps here, so the two cannot drift apart."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from docllm.domain.ports import DocumentReviewer, EventSink, LlmBreaker
from docllm.domain.services.reaper import Reaper
from docllm.domain.services.reconciler import Reconciler
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import PortCalls
from docllm.runtime.worker import Worker

Adapt = Callable[[Any, LlmGate], tuple[Any, Any]]  # (processor, gate) -> what the worker gets


def build_worker(
    processor: Any,
    reviewer: DocumentReviewer,
    breaker: LlmBreaker,
    calls: PortCalls,
    worker_id: str,
    concurrency: int,
    breaker_open_seconds: float,
    events: EventSink | None = None,
    idle_wait_seconds: float = 1.0,
    gate_logger: logging.Logger | None = None,
    worker_logger: logging.Logger | None = None,
    adapt: Adapt | None = None,
) -> Worker:
    """The worker and its LLM gate. A process whose own LLM check fails backs off no longer than
    the fleet's breaker stays open (``breaker_open_seconds``). ``adapt`` wraps the processor and
    the gate (the simulation's broken mechanisms)."""
    gate: Any = LlmGate(
        reviewer,
        breaker,
        calls,
        worker_id,
        gate_logger or logging.getLogger("docllm.llm"),
        events,
        cap=breaker_open_seconds,
    )
    if adapt is not None:
        processor, gate = adapt(processor, gate)
    if worker_logger is None:
        return Worker(processor, calls, gate, concurrency, idle_wait_seconds)
    return Worker(processor, calls, gate, concurrency, idle_wait_seconds, logger=worker_logger)


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
