"""Review (issue 43, every hand-back bounded): a provider that refuses every UPLOAD of the batch
lane (a restricted project key: chat allowed, the Files API not, 403 on every upload; or a file the
Files API always rejects) hands the same tasks back uncounted forever, as issue 43's case 8 did
with failed batches. The rig of ``test_batch_lane.py``: the container's batcher on a real
redis-server and SQLite."""

from __future__ import annotations

import time
from typing import Any

from docllm.domain.errors import ConfigurationError
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_batch_lane import ApiBut, rig_for  # noqa: F401

MAX_HANDBACKS = 2


class UploadRefused(ApiBut):
    def upload(self, data: bytes, filename: str) -> Any:
        raise ConfigurationError("the LLM at the Files API refused the credentials (403)")


def test_uploads_the_provider_always_refuses_do_not_send_the_same_tasks_round_forever(rig_for):  # noqa: F811 - the fixture
    rig, _llm = rig_for(max_attempts=2, max_handbacks=MAX_HANDBACKS)
    ids = rig.submit(5)
    batcher = rig.container.batcher()
    batcher.api = UploadRefused(batcher.api)
    # Before issue 43's fix: 8 batches within 30 s, each task in every one. Now the batcher steps on
    # for as long (no realtime worker here: a task that left the lane waits in the default lane).
    end = time.monotonic() + 10 * rig.settings.batch_max_wait_seconds + 3
    while time.monotonic() < end:
        batcher.step()
        time.sleep(0.05)
    rows = rig.rows(ids)
    tried = {i: len(rig.store.of_task(i)) for i in ids}
    # Bounded: a task is put in at most MAX_HANDBACKS batches before it leaves the lane or ends.
    assert max(tried.values()) <= MAX_HANDBACKS, (tried, [(r.status, r.attempt, r.handbacks) for r in rows])
    # ... and then left it for realtime, counted once, uncharged.
    assert all((r.status, r.handbacks, r.retry_count) == (TaskStatus.pending, 1, 0) for r in rows), rows
    assert all("reviewed realtime from now on" in (r.error or "") for r in rows), [r.error for r in rows]
