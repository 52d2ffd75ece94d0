"""Hostile review of branch `money` (issue 43 part A): the batch lane's hold. A batch reserves its
lines' estimate before the upload (``Batcher._reserve``), held for the batch's processing bound
(``batch_bound_seconds``: the provider's 24 h window and more). When the upload then fails, the
members are handed back and the batch is ``returned``, but the hold is never released: the cap
room it takes is lost for a day. Real redis-server and SQLite, the container's batcher, the test
server's Files API."""

from __future__ import annotations

from typing import Any

from docllm.domain.batches.model import BatchState
from docllm.domain.errors import ProviderUnavailable
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_batch_lane import ApiBut, rig_for  # noqa: F401 - the fixture

DAY_CAP = 1000.0


class UploadFailsOnce(ApiBut):
    def __init__(self, api: Any):
        super().__init__(api)
        self.failed = False

    def upload(self, data: bytes, name: str) -> str:
        if not self.failed:
            self.failed = True
            raise ProviderUnavailable("the Files API answered 503 (test)")
        return str(self.api.upload(data, name))


def test_review_a_batch_whose_upload_failed_leaves_its_hold_on_the_cap_for_a_day(rig_for):  # noqa: F811
    rig, llm = rig_for(spend_cap_usd_per_day=DAY_CAP)
    ids = rig.submit(5)
    batcher = rig.container.batcher()
    batcher.api = UploadFailsOnce(batcher.api)
    rig.until(lambda: bool(rig.batches()), step=batcher.step)
    [batch] = rig.batches()
    assert batch.state is BatchState.returned and batch.batch_id is None  # nothing at the provider
    assert all(r.status is TaskStatus.pending and r.retry_count == 0 for r in rig.rows(ids))
    assert llm.batches.counters["batches_created"] == 0
    view = rig.container.spend_budget().view()
    # Nothing was sent and nothing can be billed: the batch's hold must be gone with its return.
    assert view.held_micro == 0, (
        f"{view.held_micro / 1e6:.2f} USD still held for a batch that was never uploaded "
        f"(it lapses after batch_bound_seconds={rig.settings.batch_bound_seconds:.0f} s)"
    )
