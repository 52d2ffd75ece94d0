"""FoldedMetrics on files written as prometheus_client's multiprocess mode writes them: a dead
child's values fold into one file by the rule of their kind (counters add; gauges by their mode:
sum adds, max and min keep the extreme, live modes and ``all`` go), its files go, and the host's
sums do not change. The real processes: tests/e2e/test_processes_host.py."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.parser import text_string_to_metric_families

from docllm.adapters.telemetry.metrics_folding import FOLDED, FoldedMetrics


def _write(directory, file: str, metric: str, sample: str, value: float, labels: dict[str, str] | None = None):
    labels = labels or {}
    d = MmapedDict(str(directory / file))
    d.write_value(mmap_key(metric, sample, list(labels), list(labels.values()), "doc"), value, 1.0)
    d.close()


def _samples(folded: FoldedMetrics) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(folded)
    text = generate_latest(registry).decode()
    return {
        s.name + str(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


def test_dead_childrens_values_fold_by_their_kind_and_their_files_go(tmp_path):
    for pid, n in ((101, 1.0), (102, 5.0), (103, 3.0)):
        _write(tmp_path, f"counter_{pid}.db", "c", "c_total", n, {"k": "v"})
        _write(tmp_path, f"gauge_sum_{pid}.db", "gs", "gs", n)
        _write(tmp_path, f"gauge_max_{pid}.db", "gm", "gm", n)
        _write(tmp_path, f"gauge_min_{pid}.db", "gn", "gn", n)
        _write(tmp_path, f"gauge_livesum_{pid}.db", "gl", "gl", n)
        _write(tmp_path, f"gauge_all_{pid}.db", "ga", "ga", n)
    folded = FoldedMetrics(str(tmp_path))
    before = _samples(folded)
    folded.fold(101)
    folded.fold(102)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [FOLDED]
        + [
            f"{kind}_103.db"
            for kind in ("counter", "gauge_sum", "gauge_max", "gauge_min", "gauge_livesum", "gauge_all")
        ]
    )
    after = _samples(folded)
    assert after["c_total[('k', 'v')]"] == before["c_total[('k', 'v')]"] == 9.0  # nothing counted is lost
    assert after["gs[]"] == 9.0 and after["gm[]"] == 5.0 and after["gn[]"] == 1.0
    assert after["gl[]"] == 3.0  # live gauges: the live child alone
    assert [k for k in after if k.startswith("ga[")] == ["ga[('pid', '103')]"]  # `all`: the dead one's series go
