"""The state machine is not vacuous: break one safety mechanism and hypothesis finds a counterexample."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from tests.property.machine import QueueMachine
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

SEARCH = settings(
    max_examples=2000,
    stateful_step_count=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
    phases=(Phase.generate,),
)  # finding is the point; shrinking would only cost time


class UnfencedRepository(InMemoryTaskRepository):
    """commit as ``UPDATE ... WHERE task_id = ?``: no attempt, no status in the condition."""

    def commit(self, task_id, attempt, result, usage=None):
        return self._update(task_id, lambda row: True, status=TaskStatus.success, result=result) is not None


class SkippingReaper(Reaper):
    """The original note's ``if not ok: continue``: a lease whose row is not reclaimable is skipped."""

    def _settle_once(self, delivery, task_id):
        row = self.repo.get(task_id)
        if row is not None and row.status is TaskStatus.pending:
            return True  # D2: skipped forever
        return super()._settle_once(delivery, task_id)


class UnfencedMachine(QueueMachine):
    def make_ports(self, clock, tokens):
        return InMemoryTaskQueue(clock, token_factory=tokens), UnfencedRepository(clock)


class SkippingReaperMachine(QueueMachine):
    reaper_class = SkippingReaper


class NoLeftoverSweepMachine(QueueMachine):
    """The reconciler without the leftover sweep: what the original workers left stays (issue 16)."""

    def _reconciler(self) -> Reconciler:
        if not hasattr(self, "_rec"):
            self._rec = Reconciler(self.queue, self.repo, self.clock, 60_000, events=self.events)
        return self._rec


@pytest.mark.parametrize(
    "machine, symptom",
    [
        (UnfencedMachine, "committed more than once"),
        (SkippingReaperMachine, "not finished within|queue not empty"),
        (NoLeftoverSweepMachine, "leftovers are still there"),
    ],
)
@pytest.mark.timeout(900)  # a hypothesis search: 80 s alone, over 300 s seen on a loaded machine
@pytest.mark.long(80)
def test_a_broken_mechanism_is_caught(machine, symptom):
    with pytest.raises(AssertionError, match=symptom):
        run_state_machine_as_test(machine, settings=SEARCH)
