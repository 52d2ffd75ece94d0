"""deploy/grafana/docllm.json queries only what a worker exports, and what KEDA exports.

The names, label names and (for the few closed sets) label values come from the worker's own
registry rendered by ``prometheus_client.generate_latest``: the ``Metrics`` the container builds,
the queue, lane and batch gauges a worker registers (``Metrics.watch``, ``watch_lanes``,
``watch_batches``), the domain events a worker emits and an LLM call, then one placeholder child of
every labelled metric so each family has samples. KEDA's names and labels come from its own source
(tests/support/keda/prommetrics.go, v2.19.0). Every PromQL expression of every panel and template
variable is checked against them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from docllm.adapters.telemetry.metrics import Metrics, PrometheusEvents
from docllm.domain import events as ev
from docllm.domain.lanes.figures import WAIT_BUCKETS, GroupFigures, LaneFigures
from docllm.domain.llm.usage import LlmCall
from docllm.domain.tasks.model import QueueStats
from docllm.domain.tasks.outcome import Reason
from tests.support.memory.batches import InMemoryBatchStore

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "docllm.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
TARGET_LABELS = {"job", "pod"}  # added by Prometheus at scrape (pod: Kubernetes' service discovery)
CLOSED_LABELS = ("event", "reason", "queue", "state", "kind", "lane", "quantile")  # values a panel may name, checked
KEDA_METRICS = ROOT / "tests" / "support" / "keda" / "prommetrics.go"
PLACEHOLDER = "placeholder"
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms"}

NAME = re.compile(r"(?<![\w:])(?:docllm|keda)_[A-Za-z0-9_:]*")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'\s*([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
GROUPING = re.compile(r"\b(by|without)\s*\(([^)]*)\)")
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
LABEL_VALUES = re.compile(r"^label_values\(\s*(.+)\s*,\s*(\w+)\s*\)$")
RATE_OF = re.compile(r"\b(rate|irate|increase)\(\s*$")


@dataclass
class Exposition:
    labels: dict[str, set[str]] = field(default_factory=dict)  # sample name -> its label names
    types: dict[str, str] = field(default_factory=dict)  # sample name -> its family's type
    values: dict[str, set[str]] = field(default_factory=dict)  # closed label -> values seen


class Queue:
    """What ``Metrics.watch`` reads: the queue's figures and the clock."""

    def stats(self) -> QueueStats:
        return QueueStats(ready=3, processing=2, delayed=1, dead=1, oldest_claimed_at_ms=1_000)

    def now_ms(self) -> int:
        return 4_000


class Lanes:
    """What ``Metrics.watch_lanes`` reads: every lane and a tenant, each with waits sampled."""

    def lane_figures(self, window_s: int, top_tenants: int) -> LaneFigures:
        waits = (1,) * (len(WAIT_BUCKETS) + 1)
        lanes = tuple(GroupFigures(name, 2, 1, 3, waits, 30.0) for name in ("interactive", "default", "bulk"))
        return LaneFigures(window_s, lanes, (GroupFigures("acme", 1, 1, 0, waits, 5.0),), 1)


def keda_metrics() -> dict[str, tuple[str, set[str]]]:
    """KEDA's operator metrics: name -> (type, label names), from its source's declarations."""
    text = KEDA_METRICS.read_text()
    (shared,) = re.findall(r"metricLabels\s*=\s*\[\]string\{([^}]*)\}", text)
    found = {}
    for kind, body, labels in re.findall(
        r"prometheus\.New(Gauge|Counter|Histogram)Vec\(\s*prometheus\.\w+Opts\{(.*?)\},\s*(metricLabels|\[\]string\{[^}]*\})",
        text,
        re.S,
    ):
        fields = dict(re.findall(r'(Subsystem|Name):\s*"(\w+)"', body))
        name = "_".join(filter(None, ["keda", fields.get("Subsystem"), fields["Name"]]))
        found[name] = (kind.lower(), set(re.findall(r'"(\w+)"', shared if labels == "metricLabels" else labels)))
    return found


def worker_metrics() -> Metrics:
    m = Metrics()
    m.watch(Queue(), in_flight=lambda: 2)  # type: ignore[arg-type]  # stats and now_ms are all it reads
    m.watch_lanes(Lanes())
    sink = PrometheusEvents(m)
    for name in vars(ev).values():
        if isinstance(name, str) and name.islower() and name.isidentifier():
            for reason in Reason:
                sink.emit(name, reason=reason, duration=0.5)
    for state in ("closed", "open", "half_open"):
        sink.emit(ev.BREAKER_SEEN, state=state)
    sink.emit(ev.BUDGET_SEEN, spent_usd=1.5, cap_usd=10.0, over=False, source="setting", by_deployment={"east": 1.5})
    m.llm_call(LlmCall("gpt-4o-mini", "ok", 1.2, prompt_tokens=900, completion_tokens=300, cost_usd=0.0003))
    m.watch_batches(InMemoryBatchStore())  # every state is a series even before any batch exists
    return m


def render(m: Metrics) -> Exposition:
    """The registry as Prometheus scrapes it, every labelled metric with at least one child."""
    found = Exposition()
    for label in CLOSED_LABELS:
        found.values[label] = set()
    for metric in vars(m).values():
        if isinstance(metric, MetricWrapperBase) and metric._labelnames:
            metric.labels(*[PLACEHOLDER] * len(metric._labelnames))
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for sample in family.samples:
            found.labels.setdefault(sample.name, set()).update(sample.labels)
            found.types[sample.name] = family.type
            for label, value in sample.labels.items():
                if label in found.values and value != PLACEHOLDER:
                    found.values[label].add(value)
    return found


@pytest.fixture(scope="module")
def exposed() -> Exposition:
    found = render(worker_metrics())
    for name, (kind, labels) in keda_metrics().items():  # the operator's, scraped from KEDA
        found.labels[name], found.types[name] = labels, kind
    return found


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row keeps its panels inside


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            match = LABEL_VALUES.match(query.strip())
            assert match, f"variable {var['name']}: not a label_values(metric, label) query: {query}"
            yield f"variable {var['name']}", f"sum by ({match[2]}) ({match[1]})"  # the same check


def balanced(text: str, start: int) -> str:
    """The text inside the parenthesis that opens at ``start``."""
    assert text[start] == "("
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1 : i]
    raise AssertionError(f"unbalanced parentheses: {text}")


def opening_before(text: str, end: int) -> int:
    """Where the parenthesis that closes just before ``end`` opens (``sum(x) by (l)``)."""
    depth = 0
    for i in range(end - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise AssertionError(f"unbalanced parentheses: {text}")


def grouped_arguments(expr: str) -> Iterator[tuple[list[str], str]]:
    """(labels, the aggregated argument) of every ``by``/``without`` clause."""
    for match in GROUPING.finditer(expr):
        labels = [label.strip() for label in match[2].split(",") if label.strip()]
        after = expr[match.end() :].lstrip()
        if after.startswith("("):
            yield labels, balanced(after, 0)
        else:
            before = expr[: match.start()].rstrip()
            assert before.endswith(")"), f"no argument for {match[0]!r} in {expr}"
            yield labels, balanced(before, opening_before(before, len(before)))


def names_in(expr: str) -> list[str]:
    return NAME.findall(STRING.sub('""', expr))


# -- every query names what the worker exports ----------------------------------------------------


def test_the_rendering_has_what_the_worker_exports(exposed):
    """The reference itself: prometheus_client's suffixes, the scrape-time gauges, the closed values."""
    assert "docllm_tasks_succeeded_total" in exposed.labels
    assert {"docllm_llm_call_seconds_bucket", "docllm_llm_call_seconds_count"} <= exposed.labels.keys()
    assert exposed.labels["docllm_llm_call_seconds_bucket"] == {"model", "outcome", "le"}
    assert exposed.types["docllm_queue_depth"] == "gauge"
    assert exposed.values["queue"] == {"ready", "processing", "delayed", "dead"}
    assert {"succeeded", "reconciled", "stale_lease_dropped"} <= exposed.values["event"]
    assert exposed.values["lane"] == {"interactive", "default", "bulk"} and exposed.values["quantile"] == {
        "0.5",
        "0.95",
    }
    assert exposed.labels["keda_scaler_metrics_value"] >= {"scaledObject", "triggerIndex"}
    assert exposed.types["keda_scaled_object_errors_total"] == "counter"


def test_every_metric_a_query_names_is_exported(dashboard, exposed):
    seen = set()
    for where, expr in queries(dashboard):
        names = names_in(expr)
        assert names, f"{where}: no docllm metric in {expr}"
        unknown = sorted(set(names) - exposed.labels.keys())
        assert not unknown, f"{where}: not exported by the worker (or KEDA): {unknown}"
        others = [
            name for name, _ in SELECTOR.findall(STRING.sub('""', expr)) if not name.startswith(("docllm_", "keda_"))
        ]
        assert not others, f"{where}: selectors of metrics docllm does not export: {others}"
        seen.update(names)
    assert len(seen) >= 20  # the board covers the worker's metrics, not a handful


def test_every_label_a_selector_names_exists_on_its_metric(dashboard, exposed):
    for where, expr in queries(dashboard):
        for name, body in SELECTOR.findall(expr):
            if name not in exposed.labels:
                continue  # test_every_metric_a_query_names_is_exported says so
            matchers = MATCHER.findall(body)
            parts = [part for part in STRING.sub('""', body).split(",") if part.strip()]
            assert len(matchers) == len(parts), f"{where}: unparsed selector {body!r}"
            for label, op, value in matchers:
                assert label in exposed.labels[name] | TARGET_LABELS, f"{where}: {name} has no label {label!r}"
                if label in CLOSED_LABELS and "$" not in value:
                    wanted = set(value.split("|")) if op in ("=~", "!~") else {value}
                    missing = wanted - exposed.values[label]
                    assert not missing, f"{where}: {label} never takes the values {sorted(missing)}"


def test_every_grouping_label_exists_on_the_metrics_it_groups(dashboard, exposed):
    for where, expr in queries(dashboard):
        for labels, argument in grouped_arguments(expr):
            names = names_in(argument)
            assert names, f"{where}: nothing to group in {argument!r}"
            for name in set(names) & exposed.labels.keys():  # the others: see the test above
                missing = set(labels) - exposed.labels[name] - TARGET_LABELS
                assert not missing, f"{where}: {name} has no label {sorted(missing)} to group by"


def test_counters_and_histograms_are_rated_and_gauges_are_not(dashboard, exposed):
    for where, expr in queries(dashboard):
        plain = STRING.sub('""', expr)
        for match in NAME.finditer(plain):
            name, rated = match[0], bool(RATE_OF.search(plain[: match.start()]))
            if where.startswith("variable") or name not in exposed.types:
                continue
            if exposed.types[name] == "gauge":
                assert not rated, f"{where}: rate of the gauge {name}"
            else:
                assert rated, f"{where}: {name} ({exposed.types[name]}) read without rate() or increase()"


def test_quantiles_group_buckets_by_le(dashboard):
    for where, expr in queries(dashboard):
        start = expr.find("histogram_quantile(")
        while start != -1:
            argument = balanced(expr, start + len("histogram_quantile"))
            assert all(name.endswith("_bucket") for name in names_in(argument)), f"{where}: {argument}"
            assert any("le" in labels for labels, _ in grouped_arguments(argument)), f"{where}: no by (le)"
            start = expr.find("histogram_quantile(", start + 1)


def test_every_selector_follows_the_job_and_pod_variables(dashboard):
    for where, expr in queries(dashboard):
        if where.startswith("variable"):
            continue
        for name, body in SELECTOR.findall(expr):
            matchers = {(label, op, value) for label, op, value in MATCHER.findall(body)}
            if name.startswith("keda_"):  # KEDA's operator's series: the ScaledObject's, by name
                assert ("scaledObject", "=", "docllm-worker") in matchers, f"{where}: {name}{{{body}}}"
                continue
            assert {("job", "=~", "$job"), ("pod", "=~", "$pod")} <= matchers, f"{where}: {name}{{{body}}}"


def test_the_board_has_lanes_tenants_keda_a_measured_wait_and_spend_from_the_gauge(dashboard):
    """The issue's board: no +Inf estimate of the wait, no increase() of short-lived counters for
    spend, and KEDA's view beside the numbers it reads."""
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert {"Lanes", "Tenants", "KEDA"} <= set(rows)
    exprs = [expr for _, expr in queries(dashboard)]
    assert not [e for e in exprs if re.search(r"\)\s*/\s*sum\(rate\(docllm_tasks_claimed_total", e)], "the estimate"
    assert not [e for e in exprs if "increase(docllm_llm_cost_usd_total" in e]
    assert any(e.startswith("max(docllm_spend_usd_today") for e in exprs)
    assert any("docllm_lane_wait_seconds" in e for e in exprs)
    (keda,) = [
        p for p in all_panels(dashboard) if any("keda_scaler_metrics_value" in t["expr"] for t in p.get("targets", []))
    ]
    assert any('docllm_scaling_waiting{job=~"$job", pod=~"$pod"}' in t["expr"] for t in keda["targets"])


# -- the board imports anywhere ---------------------------------------------------------------------


def test_every_panel_has_a_title_and_the_templated_datasource(dashboard):
    panels = [p for p in all_panels(dashboard) if p["type"] != "row"]
    assert len(panels) >= 20
    for panel in panels:
        assert panel.get("title", "").strip(), f"panel {panel.get('id')} has no title"
        assert panel.get("datasource") == DATASOURCE, f"panel {panel['title']!r}: datasource {panel.get('datasource')}"
        assert panel.get("targets"), f"panel {panel['title']!r} queries nothing"
        for target in panel["targets"]:
            assert target.get("datasource", DATASOURCE) == DATASOURCE, f"panel {panel['title']!r} {target['refId']}"
            assert target.get("expr", "").strip(), f"panel {panel['title']!r} {target['refId']}: no expr"


def test_panel_ids_are_unique(dashboard):
    ids = [panel["id"] for panel in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_panels_fit_the_grid_without_overlapping(dashboard):
    taken: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:  # a collapsed row's panels are laid out when it opens
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, f"{panel['title']!r}: {pos}"
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']!r} overlaps {taken[(x, y)]!r}"
                taken[(x, y)] = panel["title"]


def test_the_variables_pick_a_prometheus_then_a_job_and_pods(dashboard):
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert "__inputs" not in dashboard  # a provisioned file would keep ${DS_PROMETHEUS} unreplaced
    variables = {var["name"]: var for var in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    for name in ("job", "pod"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
    for where, expr in queries(dashboard):
        for braced, bare in VARIABLE.findall(expr):
            used = braced or bare
            assert used in variables or used in GRAFANA_VARIABLES, f"{where}: unknown variable ${used}"
