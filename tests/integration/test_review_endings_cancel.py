"""Review (issue 43, one billed batch per record): a create whose record moved on is cancelled at
the provider; but when that one cancel call fails (a 5xx, a timeout: the provider was slow, which is
how the race happened), nothing cancels the unrecorded batch again: it runs and is billed, never
read. The rig and race of ``test_batch_endings.py``."""

from __future__ import annotations

import contextlib
from typing import Any

from docllm.domain.batches.model import BatchState
from docllm.domain.errors import ProviderUnavailable
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_batch_endings import SlowCreate
from tests.integration.test_batch_lane import ApiBut, rig_for  # noqa: F401


class CancelFailsOnce(ApiBut):
    def __init__(self, api: Any):
        super().__init__(api)
        self.failed = False

    def cancel(self, batch_id: str) -> Any:
        if not self.failed:
            self.failed = True
            raise ProviderUnavailable("the LLM answered 503")
        return self.api.cancel(batch_id)


def test_an_unrecorded_batch_whose_cancel_failed_once_is_still_cancelled(rig_for):  # noqa: F811 - the fixture
    rig, llm = rig_for()
    ids = rig.submit(5)
    batcher = rig.container.batcher()
    api = batcher.api
    theirs: list[str] = []

    def taken_over() -> None:
        if theirs:
            return
        [batch] = rig.batches()
        other = api.create(batch.input_file_id, batch.ref)  # the poller's, recorded first
        theirs.append(other.id)
        assert rig.store.advance(batch.ref, BatchState.uploaded, BatchState.submitted, 0, batch_id=other.id)

    batcher.api = SlowCreate(CancelFailsOnce(api), 0.01, during=taken_over)

    def step() -> None:
        with contextlib.suppress(ProviderUnavailable):  # the loop logs it and goes on
            batcher.step()

    rig.until(lambda: bool(rig.batches()), step=step)
    poller = rig.container.batch_poller()

    def both() -> None:
        step()
        poller.step()

    rig.until(rig.finished(ids), step=both)
    assert all(r.status is TaskStatus.success for r in rig.rows(ids))
    made = [b for b in llm.batches.batches if b != theirs[0]]
    assert len(made) == 1
    # The batch no record names is cancelled in the end: one billed batch per record.
    rig.until(lambda: api.retrieve(made[0]).status in ("cancelling", "cancelled"), timeout=10, step=both)
    assert api.retrieve(made[0]).status in ("cancelling", "cancelled"), api.retrieve(made[0]).status
