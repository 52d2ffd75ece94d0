"""The numbers an autoscaler sizes the worker fleet on, as the workers export them on /metrics
(deploy/kubernetes/base/worker-scaling.yaml reads them through KEDA's metrics-api scaler).

- ``WAITING``: payloads waiting for a claim that a worker may take now, the fleet's figure read
  from Redis at each scrape by every worker and reaper alike. It is ``ready_count`` of
  lua/lanes.lua (through stats.lua, the same as ``docllm_queue_depth{queue="ready"}``), the one definition of
  waiting work: every lane's plain list and every tenant's queue. A batch's members are not in it:
  the batcher has claimed them, and they wait on the provider under leases. It is 0 while the
  fleet's spend cap is reached: no worker claims until the day ends or the cap is raised, and more
  workers would only idle (an open LLM breaker is not counted so: it is minutes, not the day).
- ``BUSY``: the realtime attempts running in one process's slots (0 in the reaper, which exports it
  so that the number can be read while no worker runs), summed over the pods by the autoscaler, so
  that a shrinking backlog does not stop workers that are busy. A batch's members are in no slot:
  they hold leases for up to a day without needing a worker each.

tests/integration/test_waiting_work.py holds ``ready_count`` to "wherever a payload can wait";
tests/e2e/test_scaling_signals.py reads these numbers from real processes as KEDA does.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Signal:
    metric: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def selector(self) -> str:
        """The series as a PromQL selector (KEDA's metrics-api ``valueLocation``)."""
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"{self.metric}{{{inner}}}" if inner else self.metric


WAITING = Signal("docllm_scaling_waiting")
BUSY = Signal("docllm_attempts_in_flight")
