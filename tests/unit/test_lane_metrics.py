"""Lane and tenant gauges (adapters/telemetry/lane_metrics.py): bounded labels, quantiles only
with samples, one store read per interval, nothing (not an error) while the store is down."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from docllm.adapters.telemetry.lane_metrics import LaneGauges
from docllm.adapters.telemetry.metrics import Metrics
from docllm.domain.errors import Unavailable
from docllm.domain.lanes.figures import Kind, LaneFigures, Tally
from tests.support.memory.repository import InMemoryTaskRepository


def figures() -> LaneFigures:
    lanes, tenants = Tally(), Tally()
    lanes.add("bulk", Kind.pending, None, 7, oldest_s=90.0)
    lanes.add("interactive", Kind.finished, 3, 4)  # four waits of at most 1 s
    lanes.add("someone's-typo", Kind.pending, None, 2)  # not a lane: no label of its own
    tenants.add("A", Kind.pending, None, 7)
    tenants.add(None, Kind.processing, None, 1)
    return LaneFigures(3600, lanes.lanes(), tenants.ranked(["A", None]), 1)


def samples(collector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_lanes_and_top_tenants_are_gauges_with_bounded_labels():
    got = samples(LaneGauges(figures))
    assert got[("docllm_lane_depth", (("lane", "bulk"),))] == 7
    assert got[("docllm_lane_finished", (("lane", "interactive"),))] == 4
    assert got[("docllm_lane_oldest_pending_seconds", (("lane", "bulk"),))] == 90
    assert got[("docllm_lane_wait_seconds", (("lane", "interactive"), ("quantile", "0.95")))] == 1
    assert not any(k[0] == "docllm_lane_wait_seconds" and ("lane", "bulk") in k[1] for k in got)  # no samples
    lanes = {dict(k[1])["lane"] for k in got if k[0] == "docllm_lane_depth"}
    assert lanes == {"interactive", "default", "bulk"}
    assert got[("docllm_tenant_depth", (("tenant", "A"),))] == 7
    assert got[("docllm_tenant_in_flight", (("tenant", "(none)"),))] == 1


def test_one_read_serves_the_scrapes_of_an_interval_and_a_failed_read_shows_nothing():
    now, reads, down = [0.0], [], [False]

    def read() -> LaneFigures:
        reads.append(now[0])
        if down[0]:
            raise Unavailable("database down")
        return figures()

    gauges = LaneGauges(read, every_s=15.0, clock=lambda: now[0])
    for t in (0.0, 5.0, 14.9):
        now[0] = t
        assert samples(gauges)
    assert reads == [0.0]
    now[0], down[0] = 15.0, True
    assert samples(gauges) == {}  # the database down: no lane gauges, and the scrape still answers
    now[0], down[0] = 16.0, False
    assert samples(gauges)[("docllm_lane_depth", (("lane", "bulk"),))] == 7
    assert reads == [0.0, 15.0, 16.0]


def test_metrics_watch_lanes_reads_the_store():
    repo = InMemoryTaskRepository()
    repo.create("doc", "body")  # an existing producer's row: lane default
    metrics = Metrics()
    metrics.watch_lanes(repo)
    text = generate_latest(metrics.registry).decode()
    assert 'docllm_lane_depth{lane="default"} 1.0' in text and 'docllm_tenant_depth{tenant="(none)"} 1.0' in text
