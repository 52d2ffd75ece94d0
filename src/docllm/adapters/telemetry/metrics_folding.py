"""The metrics directory of ``docllm worker --processes``: every child writes its own files
(prometheus_client's multiprocess mode), and the parent folds a dead child's into one file it keeps.

Without the fold, every child that dies leaves its counter and histogram files for good (the
library removes only the files of its ``live*`` gauges), every scrape reads them all, and a crash
loop grows the directory by thousands a day. With it, the directory holds the live children's files
and ``folded.db``: what the dead counted, so the host's totals never go down when a child dies.

The library names a file by the kind of its metrics (``counter_<pid>.db``) and types a metric by
the first file it meets it in, so one file cannot hold several kinds: ``folded.db`` keeps the kind
(and a gauge's mode) in each entry's key, and the collector adds its entries to the children's
before the library sums them (its ``_read_metrics`` and ``_accumulate_metrics``, the two halves of
its public ``merge``; tests/e2e/test_processes_host.py fails if a release changes them).

A scrape and a fold take the same lock: a scrape never sees a dead child's values twice (folded
and still in its file) or not at all.
"""

from __future__ import annotations

import glob
import json
import os
import threading
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

FOLDED = "folded.db"
# Gauge modes whose dead values still count, and how two values combine; every other gauge mode
# (``all`` and the ``live*`` modes) shows live processes only: a dead child's file just goes.
_GAUGE_FOLDS = {"sum": "add", "min": "min", "max": "max", "mostrecent": "recent"}


class FoldedMetrics:
    """A collector over the directory (register it in the parent's registry) and ``fold`` for
    each child that exits."""

    def __init__(self, path: str):
        self.path = path
        self.folded = os.path.join(path, FOLDED)
        self.lock = threading.Lock()

    def collect(self) -> Iterable[Metric]:
        with self.lock:
            files = [f for f in glob.glob(os.path.join(self.path, "*.db")) if f != self.folded]
            metrics = MultiProcessCollector._read_metrics(files)
            if os.path.exists(self.folded):
                for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(self.folded):
                    kind, mode, metric_name, name, labels, help_text = json.loads(key)
                    metric = metrics.get(metric_name)
                    if metric is None:
                        metric = metrics[metric_name] = Metric(metric_name, help_text, kind)
                    labels_key = tuple(sorted(labels.items()))  # as _read_metrics adds them: tuples
                    if kind == "gauge":
                        metric._multiprocess_mode = mode
                        metric.add_sample(name, labels_key + (("pid", "folded"),), value, timestamp)
                    else:
                        metric.add_sample(name, labels_key, value)
            return list(MultiProcessCollector._accumulate_metrics(metrics, True))

    def fold(self, pid: int) -> None:
        """Child ``pid`` has exited: add its values to ``folded.db``, then remove its files."""
        with self.lock:
            for path in glob.glob(os.path.join(self.path, f"*_{pid}.db")):
                parts = os.path.basename(path)[: -len(".db")].split("_")
                kind = parts[0]  # counter, histogram, summary, gauge (then its mode)
                mode = parts[1] if kind == "gauge" and len(parts) == 3 else ""
                how = _GAUGE_FOLDS.get(mode) if kind == "gauge" else "add"
                if how is not None:
                    _fold_into(self.folded, path, kind, mode, how)
                os.remove(path)


def _fold_into(target: str, source: str, kind: str, mode: str, how: str) -> None:
    folded = MmapedDict(target)
    try:
        for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(source):
            typed = json.dumps([kind, mode, *json.loads(key)], sort_keys=True)
            old, old_timestamp = folded.read_value(typed)
            seen = old != 0 or old_timestamp != 0  # read_value starts a missing key at (0, 0)
            if how == "add" or not seen:
                value = old + value if how == "add" else value
            elif how == "min":
                value = min(old, value)
            elif how == "max":
                value = max(old, value)
            elif timestamp < old_timestamp:  # recent: the later of the two
                value, timestamp = old, old_timestamp
            folded.write_value(typed, value, timestamp)
    finally:
        folded.close()
