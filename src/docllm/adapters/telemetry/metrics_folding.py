"""The metrics directory of ``docllm worker --processes``: every child writes its own files
(prometheus_client's multiprocess mode), and the parent folds a dead child's into files it keeps.

Without the fold, every child that dies leaves its counter and histogram files for good (the
library removes only the files of its ``live*`` gauges), every scrape reads them all, and a crash
loop grows the directory by thousands a day. With it, the directory holds the live children's files
and one folded file per kind of metric the dead wrote (``counter_folded.db``,
``histogram_folded.db``): the folded values are what the dead counted, so the host's totals never
go down when a child dies.

A scrape and a fold take the same lock: a scrape never sees a dead child's values twice (folded
and still in its file) or not at all.
"""

from __future__ import annotations

import glob
import os
import threading
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

FOLDED = "folded"  # the pid part of the parent's files
# Gauge modes whose dead values still count, and how two values combine; every other gauge mode
# (``all`` and the ``live*`` modes) shows live processes only: a dead child's file just goes.
_GAUGE_FOLDS = {"sum": "add", "min": "min", "max": "max", "mostrecent": "recent"}


class FoldedMetrics:
    """A collector over the directory (register it in the parent's registry) and ``fold`` for
    each child that exits."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()

    def collect(self) -> Iterable[Metric]:
        with self.lock:
            return list(MultiProcessCollector.merge(glob.glob(os.path.join(self.path, "*.db")), accumulate=True))

    def fold(self, pid: int) -> None:
        """Child ``pid`` has exited: add its values to the folded files, then remove its files."""
        with self.lock:
            for path in glob.glob(os.path.join(self.path, f"*_{pid}.db")):
                parts = os.path.basename(path)[: -len(".db")].split("_")
                kind = parts[0]
                how = _GAUGE_FOLDS.get(parts[1]) if kind == "gauge" and len(parts) == 3 else "add"
                if kind != "gauge" or how is not None:
                    prefix = "_".join(parts[:-1])  # counter, histogram, summary, gauge_<mode>
                    _fold_into(os.path.join(self.path, f"{prefix}_{FOLDED}.db"), path, how or "add")
                os.remove(path)


def _fold_into(target: str, source: str, how: str) -> None:
    folded = MmapedDict(target)
    try:
        for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(source):
            old, old_timestamp = folded.read_value(key)
            seen = old != 0 or old_timestamp != 0  # read_value starts a missing key at (0, 0)
            if how == "add" or not seen:
                value = old + value if how == "add" else value
            elif how == "min":
                value = min(old, value)
            elif how == "max":
                value = max(old, value)
            elif timestamp < old_timestamp:  # recent: the later of the two
                value, timestamp = old, old_timestamp
            folded.write_value(key, value, timestamp)
    finally:
        folded.close()
