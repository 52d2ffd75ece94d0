"""Event names the services emit, the port they go to (``EventSink``), and sinks that need no infrastructure."""

from __future__ import annotations

from typing import Any, Protocol

CLAIMED = "claimed"
STARTED = "started"
SUCCEEDED = "succeeded"
RETRIED = "retried"
FAILED = "failed"
DEAD_LETTERED = "dead_lettered"
DUPLICATE = "duplicate_ignored"
STALE = "stale_attempt"
LEASE_RENEWED = "lease_renewed"
LEASE_LOST = "lease_lost"
ABANDONED = "abandoned"
RELEASED = "released"
RECLAIMED = "reclaimed"
REQUEUED = "requeued"
STALE_LEASE_DROPPED = "stale_lease_dropped"
RECONCILED = "reconciled"
LEFTOVER_RELEASED = "leftover_released"
SUBMITTED = "submitted"
REOPENED = "reopened"
DISCARDED = "discarded"
CANCELLED = "cancelled"
BREAKER = "llm_breaker"  # a transition of the fleet's LLM breaker, by the process that made it
BREAKER_SEEN = "llm_breaker_seen"  # this process saw the breaker in a new state (a gauge)
BUDGET_SEEN = "spend_budget_seen"  # this process's latest view of the fleet's spend budget (gauges)
# The batch lane (issue 28): a batch recorded, created at the provider, adopted after its batcher
# died, its results applied, its members handed back (expired, cancelled, failed, lost files).
BATCH_OPENED = "batch_opened"
BATCH_SUBMITTED = "batch_submitted"
BATCH_ADOPTED = "batch_adopted"
BATCH_APPLIED = "batch_applied"
BATCH_RETURNED = "batch_returned"
BATCH_CALL_FAILED = "batch_call_failed"  # the provider refused a call for a batch; tried again next poll


class EventSink(Protocol):
    """Where services report what happened (logs, metrics, the simulation's trace)."""

    def emit(self, event: str, **fields: Any) -> None: ...


class NullEvents:
    def emit(self, event: str, **fields: Any) -> None:
        pass


class RecordingEvents:
    """Keeps every event in order: for tests and the simulation's traces."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


class FanoutEvents:
    """Sends each event to several sinks (logs and metrics, say)."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks

    def emit(self, event: str, **fields: Any) -> None:
        for sink in self.sinks:
            sink.emit(event, **fields)
