"""What KEDA's metrics-api scaler reads (tests/support/keda/metrics_api_scaler.go, v2.19.0), for the
tests to read the same number from real docllm processes.

``format: prometheus``: the response is Prometheus text; ``valueLocation`` a PromQL selector whose
name picks the family and whose ``label="value"`` matchers must all match a series; the first such
series' value is the answer (getValueFromPrometheusResponse). ``aggregateFromKubeServiceEndpoints``:
every ready endpoint of the Service is asked; those that fail are left out, and the rest are
combined by ``aggregationType`` (sum, max, min, average); all failing is an error
(aggregateMetricsFromMultipleEndpoints)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

SELECTOR = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$")
MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"\s*,?')


class NotRead(Exception):
    """What KEDA counts as an endpoint's error."""


def value_from_prometheus(body: str, value_location: str) -> float:
    found = SELECTOR.match(value_location.strip())
    if not found:
        raise ValueError(f"not a selector: {value_location}")
    name, inner = found.group(1), found.group(2) or ""
    matchers = dict(MATCHER.findall(inner))
    families = {f.name: f for f in text_string_to_metric_families(body)}
    if name not in families:
        raise NotRead(f"metric '{name}' not found")
    for sample in families[name].samples:
        # a gauge's or untyped series (a counter's family name drops _total: KEDA reads it by its
        # family name too; docllm's scaling signals are gauges)
        if sample.name == name and matchers.items() <= sample.labels.items():
            return float(sample.value)
    raise NotRead(f"value {value_location} not found")


def read(url: str, value_location: str) -> float:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310 - the test's own loopback URL
            body = reply.read().decode()
    except OSError as exc:
        raise NotRead(str(exc)) from exc
    return value_from_prometheus(body, value_location)


def aggregate(urls: Iterable[str], value_location: str, how: str) -> float:
    values = []
    for url in urls:
        try:
            values.append(read(url, value_location))
        except NotRead:
            continue
    if not values:
        raise NotRead("could not get any metric successfully from the endpoints")
    if how == "sum":
        return sum(values)
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    return sum(values) / len(values)
