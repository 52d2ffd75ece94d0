"""Prometheus metrics of one process, in a registry of its own (tests build several side by side).

Counters follow the domain events (``PrometheusEvents``, an ``EventSink``); the LLM is timed by a
reviewer decorator, and each of its calls counted by model (``Metrics.llm_call``: tokens, outcome,
seconds, cost); Redis and database outages are counted by a port proxy; queue depths, the
oldest lease and the attempts in flight are read when Prometheus scrapes (``QueueGauges``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from docllm.adapters.telemetry.batch_metrics import BatchGauges
from docllm.adapters.telemetry.lane_metrics import LaneGauges
from docllm.adapters.telemetry.scaling import WAITING
from docllm.domain import events as ev
from docllm.domain.batches.ports import BatchStore
from docllm.domain.errors import Unavailable
from docllm.domain.events import EventSink
from docllm.domain.lanes.figures import SHOWN_TOP_TENANTS, SHOWN_WINDOW_S
from docllm.domain.lanes.ports import LaneViews
from docllm.domain.llm.usage import LlmCall
from docllm.domain.review.ports import DocumentReviewer, review_with
from docllm.domain.review.rubric import Rubric
from docllm.domain.tasks.outcome import Reason
from docllm.domain.tasks.ports import Clock, QueueInspection

log = logging.getLogger("docllm.metrics")

SLOW = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)  # LLM calls, attempts
FAST = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)  # reaper cycles


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"docllm_{name}", doc, labels, registry=r)

        self.events = counter("events", "Domain events by name", "event")
        self.claimed = counter("tasks_claimed", "Payloads claimed from ready")
        self.started = counter("attempts_started", "Attempts started on the row (pending -> processing)")
        self.succeeded = counter("tasks_succeeded", "Attempts that committed a report")
        self.failed = counter("tasks_failed", "Tasks that ended failed", "reason")
        self.retried = counter("tasks_retried", "Attempts that failed and were scheduled again", "reason")
        self.released = counter("tasks_released", "Attempts handed back unrun or unfinished", "reason")
        self.reclaimed = counter("tasks_reclaimed", "Expired leases the reaper sent back", "reason")
        self.dead_lettered = counter("tasks_dead_lettered", "Payloads moved to the dead-letter list", "reason")
        self.renewals = counter("lease_renewals", "Leases renewed by a heartbeat")
        self.leases_lost = counter("leases_lost", "Heartbeats that found the lease gone")
        self.backend_errors = counter("backend_errors", "Calls that found Redis or the database unavailable", "backend")
        self.llm_errors = counter("llm_errors", "Reviews that raised, by error class", "provider", "error_class")
        self.breaker_transitions = counter(
            "llm_breaker_transitions", "Transitions of the fleet's LLM breaker made by this process", "to"
        )
        self.breaker_state = Gauge(
            "docllm_llm_breaker_state",
            "The LLM breaker as this process last saw it",
            ["state"],
            registry=r,
            multiprocess_mode="livemostrecent",  # --processes: the latest view of a live child
        )

        # The fleet's spend budget as this process last saw it (I14; docllm budget).
        def budget(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, registry=r, multiprocess_mode="livemostrecent")

        self.spend_today = budget("docllm_spend_usd_today", "The fleet's LLM spend today (authority clock)")
        self.spend_cap = budget("docllm_spend_cap_usd", "The fleet's daily spend cap in force (0: none)")
        self.spend_cap_reached = budget(
            "docllm_spend_cap_reached", "1 while the spend cap is reached and claims are stopped"
        )
        self.deployment_spend_today = Gauge(
            "docllm_deployment_spend_usd_today",
            "Each LLM deployment's share of the fleet's spend today (authority clock)",
            ["deployment"],
            registry=r,
            multiprocess_mode="livemostrecent",
        )
        self.deployments_spent: set[str] = set()  # labels set so far: 0 once a new day has none
        self.llm_seconds = Histogram(
            "docllm_llm_review_seconds",
            "Time of one document review (all LLM calls)",
            ["provider", "outcome"],
            buckets=SLOW,
            registry=r,
        )
        self.llm_tokens = counter(
            "llm_tokens",
            "Tokens the LLM reported, by kind (prompt, completion; cached: prompt tokens from the provider's cache)",
            "model",
            "kind",
        )
        self.llm_calls = counter("llm_calls", "LLM requests by outcome (ok, error, cancelled)", "model", "outcome")
        self.llm_call_seconds = Histogram(
            "docllm_llm_call_seconds", "Time of one LLM request", ["model", "outcome"], buckets=SLOW, registry=r
        )
        self.llm_cost = counter("llm_cost_usd", "USD the LLM calls cost (models DOCLLM_LLM_PRICES prices)", "model")
        self.attempt_seconds = Histogram(
            "docllm_attempt_duration_seconds", "Attempts from start to outcome", ["outcome"], buckets=SLOW, registry=r
        )
        self.limit_wait = Histogram(
            "docllm_llm_limit_wait_seconds",
            "Time each LLM request waited for its turn under the fleet's rate limits",
            buckets=(0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.reaper_cycle = Histogram("docllm_reaper_cycle_seconds", "One reaper cycle", buckets=FAST, registry=r)
        self.reconcile_cycle = Histogram(
            "docllm_reconciler_cycle_seconds", "One reconciler cycle", buckets=FAST, registry=r
        )

    def llm_call(self, call: LlmCall) -> None:
        """One LLM request ended (the OpenAIReviewer's ``on_call``)."""
        self.llm_calls.labels(call.model, call.outcome).inc()
        self.llm_call_seconds.labels(call.model, call.outcome).observe(call.seconds)
        self.llm_tokens.labels(call.model, "prompt").inc(call.prompt_tokens)
        self.llm_tokens.labels(call.model, "completion").inc(call.completion_tokens)
        self.llm_tokens.labels(call.model, "cached").inc(call.cached_tokens)
        if call.cost_usd is not None:
            self.llm_cost.labels(call.model).inc(call.cost_usd)

    def watch(
        self,
        queue: WatchedQueue,
        in_flight: Callable[[], int] | None = None,
        claims_stopped: Callable[[], bool] | None = None,
    ) -> None:
        """Publish the queue's depths (and this process's attempts in flight) at every scrape;
        ``claims_stopped``: the fleet takes no work now (scaling.py's WAITING is then 0)."""
        self.registry.register(QueueGauges(queue, in_flight, claims_stopped))

    def watch_lanes(self, views: LaneViews) -> None:
        """Publish the lanes' and top tenants' figures (lane_metrics.py) at scrape time."""
        self.registry.register(LaneGauges(lambda: views.lane_figures(SHOWN_WINDOW_S, SHOWN_TOP_TENANTS)))

    def watch_batches(self, store: BatchStore) -> None:
        """Publish the provider batches per state (batch_metrics.py) at scrape time."""
        self.registry.register(BatchGauges(store.counts))

    def publish(
        self,
        queue: WatchedQueue,
        in_flight: Callable[[], int] | None = None,
        claims_stopped: Callable[[], bool] | None = None,
    ) -> Callable[[], None]:
        """A child of ``docllm worker --processes``: the same gauges as ``watch``, written when the
        returned function is called (the parent's multiprocess collector reads the files)."""
        return PublishedGauges(self.registry, QueueGauges(queue, in_flight, claims_stopped)).refresh

    def counting(self, port: Any, backend: str) -> Any:
        return CountingUnavailable(port, self.backend_errors.labels(backend))


class PrometheusEvents:
    """The EventSink that counts: every event by name, the task outcomes also by ``Reason``."""

    def __init__(self, metrics: Metrics):
        m = self.m = metrics
        self._plain = {
            ev.CLAIMED: m.claimed,
            ev.STARTED: m.started,
            ev.SUCCEEDED: m.succeeded,
            ev.LEASE_RENEWED: m.renewals,
            ev.LEASE_LOST: m.leases_lost,
        }
        self._by_reason = {
            ev.FAILED: m.failed,
            ev.RETRIED: m.retried,
            ev.RELEASED: m.released,
            ev.DEAD_LETTERED: m.dead_lettered,
            ev.RECLAIMED: m.reclaimed,
            ev.REQUEUED: m.reclaimed,
        }  # REQUEUED: claimed, never started, lease expired

    def emit(self, event: str, **fields: Any) -> None:
        m = self.m
        m.events.labels(event).inc()
        if event in self._plain:
            self._plain[event].inc()
        elif event in self._by_reason:
            self._by_reason[event].labels(reason_label(fields.get("reason"))).inc()
        if event == ev.BREAKER:
            m.breaker_transitions.labels(str(fields.get("change", "?"))).inc()
        elif event == ev.BUDGET_SEEN:
            m.spend_today.set(fields.get("spent_usd") or 0)
            m.spend_cap.set(fields.get("cap_usd") or 0)
            m.spend_cap_reached.set(1 if fields.get("over") else 0)
            spent = fields.get("by_deployment") or {}
            m.deployments_spent |= set(spent)
            for name in m.deployments_spent:  # a new day's count starts empty: back to 0
                m.deployment_spend_today.labels(name).set(spent.get(name, 0))
        elif event == ev.BREAKER_SEEN:
            for state in ("closed", "open", "half_open"):  # one series per state, 1 for the current one
                m.breaker_state.labels(state).set(1 if fields.get("state") == state else 0)
        if "duration" in fields:
            m.attempt_seconds.labels(event).observe(fields["duration"])


def reason_label(reason: object) -> str:
    """The label value: the event's ``Reason``; never a free text (it would carry ids and messages)."""
    return reason.value if isinstance(reason, Reason) else Reason.other.value


class AttemptTimer:
    """An EventSink decorator: adds ``duration`` (seconds, this process's monotonic clock; a record,
    never an input to a decision) to the event that ends an attempt started in this process."""

    ENDS = frozenset({ev.SUCCEEDED, ev.RETRIED, ev.FAILED, ev.RELEASED, ev.STALE, ev.LEASE_LOST, ev.CANCELLED})
    LIMIT = 10_000  # attempts whose end this process never sees (a lost lease) must not pile up

    def __init__(self, inner: EventSink):
        self.inner = inner
        self._started: dict[tuple[Any, Any], float] = {}
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        key = (fields.get("task_id"), fields.get("attempt"))
        if event == ev.STARTED:
            with self._lock:
                if len(self._started) >= self.LIMIT:
                    self._started.clear()
                self._started[key] = time.monotonic()
        elif event in self.ENDS and "duration" not in fields:
            with self._lock:
                started = self._started.pop(key, None)
            if started is not None:
                fields["duration"] = round(time.monotonic() - started, 3)
        self.inner.emit(event, **fields)


class TimedReviewer:
    """A DocumentReviewer decorator: the review's latency, and its errors by class."""

    def __init__(self, inner: DocumentReviewer, metrics: Metrics):
        self.inner, self.m, self.name = inner, metrics, inner.name

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            report = await review_with(self.inner, task_name, document, rubric)
        except Exception as exc:
            self.m.llm_seconds.labels(self.name, "error").observe(time.perf_counter() - started)
            self.m.llm_errors.labels(self.name, type(exc).__name__).inc()
            raise
        self.m.llm_seconds.labels(self.name, "ok").observe(time.perf_counter() - started)
        return report

    async def check(self) -> None:
        await self.inner.check()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


class CountingUnavailable:
    """A port proxy: each ``Unavailable`` that passes through is counted once (an error that a
    wrapped clock raised inside a wrapped queue call is not counted twice)."""

    def __init__(self, target: Any, counter: Any):
        self._target, self._counter = target, counter

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if attr.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Unavailable as exc:
                if not getattr(exc, "docllm_counted", False):
                    exc.docllm_counted = True  # type: ignore[attr-defined]
                    self._counter.inc()
                raise

        return call


class WatchedQueue(Clock, QueueInspection, Protocol):
    """What the gauges read: the queue's figures and the authority clock."""


class QueueGauges:
    """A custom collector: values read at scrape time, so they are never stale."""

    def __init__(
        self,
        queue: WatchedQueue,
        in_flight: Callable[[], int] | None,
        claims_stopped: Callable[[], bool] | None = None,
    ):
        self.queue, self.in_flight, self.claims_stopped = queue, in_flight, claims_stopped

    def collect(self):
        if self.in_flight is not None:
            yield GaugeMetricFamily(
                "docllm_attempts_in_flight", "Attempts running in this process", value=self.in_flight()
            )
        try:
            stats, now_ms = self.queue.stats(), self.queue.now_ms()
        except Exception as exc:  # noqa: BLE001 - Redis down: no depths this scrape, the rest still served
            log.debug("queue depths unavailable: %s", exc)
            return
        depth = GaugeMetricFamily("docllm_queue_depth", "Payloads per queue structure", labels=["queue"])
        for name in ("ready", "processing", "delayed", "dead"):
            depth.add_metric([name], getattr(stats, name))
        yield depth
        try:  # the spend cap reached: no worker claims, and more workers would only idle
            stopped = self.claims_stopped is not None and self.claims_stopped()
        except Exception as exc:  # noqa: BLE001 - unknown this scrape: the waiting work as it is
            log.debug("whether claims are stopped is unknown: %s", exc)
            stopped = False
        yield GaugeMetricFamily(
            WAITING.metric,
            "Work waiting that a worker may take now: ready, every lane and tenant; 0 while the spend cap stops claims",
            value=0 if stopped else stats.ready,
        )
        oldest = stats.oldest_claimed_at_ms
        age = 0.0 if oldest is None else max(0, now_ms - oldest) / 1000.0
        yield GaugeMetricFamily(
            "docllm_oldest_processing_age_seconds", "Age of the oldest current lease (0 when none)", value=age
        )


class PublishedGauges:
    """``QueueGauges``' readings as multiprocess gauges: attempts in flight summed over the live
    children, the queue's figures (the same from every child) the most recent reading of one."""

    def __init__(self, registry: CollectorRegistry, reading: QueueGauges):
        self.reading = reading
        in_flight = "Attempts running in this host's live worker processes"
        self.gauges = {
            "docllm_attempts_in_flight": Gauge(
                "docllm_attempts_in_flight", in_flight, registry=registry, multiprocess_mode="livesum"
            ),
            "docllm_queue_depth": Gauge(
                "docllm_queue_depth",
                "Payloads per queue structure",
                ["queue"],
                registry=registry,
                multiprocess_mode="livemostrecent",
            ),
            WAITING.metric: Gauge(
                WAITING.metric,
                "Work waiting that a worker may take now",
                registry=registry,
                multiprocess_mode="livemostrecent",
            ),
            "docllm_oldest_processing_age_seconds": Gauge(
                "docllm_oldest_processing_age_seconds",
                "Age of the oldest current lease (0 when none)",
                registry=registry,
                multiprocess_mode="livemostrecent",
            ),
        }

    def refresh(self) -> None:
        for family in self.reading.collect():
            for sample in family.samples:
                gauge = self.gauges[sample.name]
                (gauge.labels(**sample.labels) if sample.labels else gauge).set(sample.value)
