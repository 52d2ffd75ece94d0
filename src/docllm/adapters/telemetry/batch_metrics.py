"""Provider batch gauges (issue 28), read from the batch record when Prometheus scrapes.

They are the fleet's figures, the same from every process (as ``docllm_queue_depth``): aggregate
them with ``max``, not ``sum``. One reading (``BatchStore.counts``, one grouped read) serves the
scrapes of ``EVERY_S`` seconds. The ``state`` label takes the five names of ``BatchState`` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client.core import GaugeMetricFamily

from docllm.adapters.telemetry.throttled_read import ThrottledRead
from docllm.domain.batches.model import BatchCount, BatchState

EVERY_S = 15.0


class BatchGauges:
    """A custom collector over ``read`` (``BatchStore.counts``), at most one read per ``every_s``."""

    def __init__(
        self, read: Callable[[], dict[BatchState, BatchCount]], every_s: float = EVERY_S, clock=time.monotonic
    ):
        self.counts = ThrottledRead(read, "batch counts", every_s, clock)

    def collect(self):
        counts = self.counts()
        if counts is None:
            return
        batches = GaugeMetricFamily("docllm_llm_batches", "Provider batches per state", labels=["state"])
        for state in BatchState:
            batches.add_metric([state.value], counts.get(state, BatchCount()).batches)
        yield batches
        yield GaugeMetricFamily(
            "docllm_llm_batch_tasks_unfinished",
            "Tasks in provider batches not yet applied or returned (their leases held by the batch)",
            value=sum(c.tasks for s, c in counts.items() if not s.terminal),
        )
