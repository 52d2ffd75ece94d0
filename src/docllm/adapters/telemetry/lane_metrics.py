"""Lane and tenant gauges (issue 26), read from the task table when Prometheus scrapes.

They are the fleet's figures, the same from every process (as ``docllm_queue_depth``): aggregate
them with ``max``, not ``sum``. One reading serves the scrapes of ``EVERY_S`` seconds, so a
fleet of N processes scraped every 15 s costs the database at most N grouped reads per
``EVERY_S`` (each bounded, lanes.py).

Label cardinality is bounded: ``lane`` takes the fixed names of ``LANES`` only (rows under any
other name are in ``docllm stats``, not here); ``tenant`` only the top ``SHOWN_TOP_TENANTS`` of the
window (``(none)`` for rows without a tenant) and ``(other)`` for all the rest, so at most that many
plus one series per tenant gauge exist at once; a tenant that leaves the top N stops being
exported rather than keeping a stale value. A tenant whose work all ended within the window keeps
its waits and done count (issue 44).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client.core import GaugeMetricFamily

from docllm.adapters.telemetry.throttled_read import ThrottledRead
from docllm.domain.lanes.figures import LANES, LaneFigures

EVERY_S = 15.0
QUANTILES = (0.5, 0.95)
NO_TENANT = "(none)"  # as `docllm stats` shows it


class LaneGauges:
    """A custom collector over ``read`` (the store's figures), at most one read per ``every_s``
    of ``clock`` (throttled_read.py)."""

    def __init__(self, read: Callable[[], LaneFigures], every_s: float = EVERY_S, clock=time.monotonic):
        self.figures = ThrottledRead(read, "lane figures", every_s, clock)

    def collect(self):
        f = self.figures()
        if f is None:
            return
        lanes = [g for g in f.lanes if g.name in LANES]
        per_lane = {
            "depth": ("docllm_lane_depth", "Pending tasks per lane"),
            "in_flight": ("docllm_lane_in_flight", "Tasks processing per lane"),
            "finished": ("docllm_lane_finished", f"Tasks that ended in the last {f.window_s} s per lane"),
        }
        for attr, (name, doc) in per_lane.items():
            family = GaugeMetricFamily(name, doc, labels=["lane"])
            for g in lanes:
                family.add_metric([g.name or ""], getattr(g, attr))
            yield family
        wait = GaugeMetricFamily(
            "docllm_lane_wait_seconds",
            "Creation to first attempt start, upper bound of the quantile's bucket (started tasks of the window)",
            labels=["lane", "quantile"],
        )
        oldest = GaugeMetricFamily(
            "docllm_lane_oldest_pending_seconds", "Age of the oldest pending task per lane", labels=["lane"]
        )
        for g in lanes:
            for q in QUANTILES:
                value = g.wait_quantile(q)
                if value is not None:  # no samples: no series, rather than a made-up 0
                    wait.add_metric([g.name or "", str(q)], value)
            oldest.add_metric([g.name or ""], g.oldest_pending_s or 0.0)
        yield wait
        yield oldest
        depth = GaugeMetricFamily("docllm_tenant_depth", "Pending tasks of the deepest tenants", labels=["tenant"])
        running = GaugeMetricFamily(
            "docllm_tenant_in_flight", "Tasks processing of the deepest tenants", labels=["tenant"]
        )
        done = GaugeMetricFamily(
            "docllm_tenant_finished", f"Tasks that ended in the last {f.window_s} s per tenant", labels=["tenant"]
        )
        per_minute = GaugeMetricFamily(
            "docllm_tenant_done_per_minute", f"Tasks ended per minute over the last {f.window_s} s", labels=["tenant"]
        )
        tenant_wait = GaugeMetricFamily(
            "docllm_tenant_wait_seconds",
            "Creation to first attempt start per tenant, upper bound of the quantile's bucket",
            labels=["tenant", "quantile"],
        )
        shown = [*f.tenants, *([f.others] if f.others is not None else [])]  # the top N, then "(other)"
        for g in shown:
            label = g.name or NO_TENANT
            depth.add_metric([label], g.depth)
            running.add_metric([label], g.in_flight)
            done.add_metric([label], g.finished)
            per_minute.add_metric([label], f.per_minute(g))
            for q in QUANTILES:
                value = g.wait_quantile(q)
                if value is not None:
                    tenant_wait.add_metric([label, str(q)], value)
        yield depth
        yield running
        yield done
        yield per_minute
        yield tenant_wait
