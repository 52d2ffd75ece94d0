"""How a batch ends, tried as a new user would (issue 43): the container's batcher and poller on a
real redis-server and SQLite, the test server's Files and Batch APIs through the real ``openai``
client (the rig of ``test_batch_lane.py``).

- A batch's chunking is recorded with it and applied as recorded: DOCLLM_LLM_MAX_CHUNK_CHARS
  changed while it is out, every chunk's findings are committed and every line's cost kept.
- Every hand-back is bounded: a provider that fails every batch (``token_limit_exceeded``) hands
  each task back counted; past the bound it leaves the batch lane for realtime; past
  DOCLLM_MAX_HANDBACKS in the lane it fails with an error that says why.
- A lost batch lease during the create makes one billed batch per record: a poller adopts an
  ``uploaded`` batch only once the create's own timeout has passed, and a create whose record
  failed is cancelled at the provider.
"""

from __future__ import annotations

import time
from typing import Any

from docllm.domain import events as ev
from docllm.domain.batches.model import BatchState
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_batch_lane import (  # noqa: F401
    DOC,
    ApiBut,
    Rig,
    make_settings,
    rig_for,
    run_until_finished,
    running,
    submitted_batch,
)

CHUNK = 400  # DOCLLM_LLM_MAX_CHUNK_CHARS when the batch is made: three chunks of the document below


def three_sections(i: int) -> str:
    return "\n".join(f"## Part {n}\n\n" + "Plain steady text. " * 15 + "\n" for n in range(1, 4))


def test_a_chunk_size_changed_while_a_batch_is_out_is_applied_as_the_batch_was_made(rig_for, tmp_path, redis_url):  # noqa: F811 - the fixture
    rig, llm = rig_for(llm_max_chunk_chars=CHUNK, batch_max_tasks=2)
    ids = rig.submit(2, doc=three_sections)
    ref = submitted_batch(rig, ids)
    assert rig.store.get(ref).max_chunk_chars == CHUNK
    # The operator changes the chunk size and restarts: another process, with the new setting, polls.
    later = Rig(make_settings(tmp_path, redis_url, llm, llm_max_chunk_chars=12_000, batch_max_tasks=2))
    rig.until(rig.finished(ids), step=later.container.batch_poller().step)
    for row in rig.rows(ids):
        assert row.status is TaskStatus.success, row.error
        assert row.result["chunks"] == 3  # every chunk's findings, placed in the document
        assert all(f"Part {n}" in str(row.result["findings"]) for n in (1, 2, 3)), row.result["findings"]
        assert row.usage is not None and row.usage.calls == 3  # every line's cost kept on the task
    assert llm.batches.counters["batch_lines"] == 6


def test_batches_the_provider_keeps_failing_hand_each_task_back_counted_then_realtime_serves_it(rig_for):  # noqa: F811 - the fixture
    """The provider fails every batch (as OpenAI does over the organisation's enqueued-token limit,
    token_limit_exceeded): each end counts; at the bound (one of DOCLLM_MAX_HANDBACKS=2) the task
    leaves the batch lane and the realtime workers review it, nothing charged."""
    rig, llm = rig_for(llm_options={"fail_batches": lambda batch: True}, max_attempts=2, max_handbacks=2)
    ids = rig.submit(5)
    run_until_finished(rig, ids)
    for row in rig.rows(ids):
        assert row.status is TaskStatus.success, row.error
        assert (row.retry_count, row.handbacks) == (0, 1)  # one failed batch, counted; then realtime
        assert len(rig.store.of_task(row.task_id)) == 1  # never batched again
    assert {b.state for b in rig.batches()} == {BatchState.returned}
    assert sum(r["path"].endswith("/chat/completions") for r in llm.requests) == 5  # served realtime
    assert sum(1 for name, f in rig.events.events if f.get("reason") == "to_realtime") == 5


def test_a_batch_end_past_the_hand_back_bound_fails_its_tasks_saying_why(rig_for):  # noqa: F811 - the fixture
    rig, llm = rig_for(llm_options={"fail_batches": lambda batch: True}, max_attempts=2, max_handbacks=0)
    ids = rig.submit(5)
    run_until_finished(rig, ids)
    for row in rig.rows(ids):
        assert row.status is TaskStatus.failed and row.attempt == 1
        assert "ended failed (failed: The batch failed (test server).)" in row.error, row.error  # the provider's why
        assert "DOCLLM_MAX_HANDBACKS=0" in row.error, row.error
    assert len(rig.batches()) == 1  # one batch, failed once: nothing sent again


class SlowCreate(ApiBut):
    """The batch API, its create outlasting the batch lease (a stalled host): meanwhile ``during``."""

    def __init__(self, api: Any, seconds: float, during: Any = None):
        super().__init__(api)
        self.seconds, self.during = seconds, during

    def create(self, input_file_id: str, ref: str) -> Any:
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            if self.during is not None:
                self.during()
            time.sleep(0.02)
        return self.api.create(input_file_id, ref)


def test_a_batch_lease_lost_during_the_create_makes_one_billed_batch(rig_for):  # noqa: F811 - the fixture
    """The create outlasts the batch lease several times over; a poller polling all along does not
    adopt the ``uploaded`` batch before the create's own timeout has passed: one batch is made."""
    rig, llm = rig_for(llm_timeout_seconds=3)
    ids = rig.submit(5)
    batcher, poller = rig.container.batcher(), rig.container.batch_poller()
    lease = rig.settings.batch_lease_seconds
    batcher.api = SlowCreate(batcher.api, 5 * lease, during=poller.step)  # the poller runs beside it
    rig.until(lambda: bool(rig.batches()) and rig.batches()[0].batch_id is not None, step=batcher.step)
    rig.until(rig.finished(ids), step=poller.step)
    assert llm.batches.counters["batches_created"] == 1
    assert not any(name == ev.BATCH_ADOPTED for name, _ in rig.events.events)
    assert all((r.status, r.attempt, r.handbacks) == (TaskStatus.success, 1, 0) for r in rig.rows(ids))


def test_a_create_whose_record_moved_on_is_cancelled_at_the_provider(rig_for):  # noqa: F811 - the fixture
    """While this batcher's create was in flight, another poller took the batch over and recorded a
    batch of its own: this one is cancelled at the provider, the recorded one applied."""
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

    batcher.api = SlowCreate(api, 0.01, during=taken_over)
    rig.until(lambda: bool(rig.batches()), step=batcher.step)
    [batch] = rig.batches()
    assert batch.batch_id == theirs[0]
    made = [b for b in llm.batches.batches if b != theirs[0]]
    assert len(made) == 1 and llm.batches.counters["batches_cancelled"] == 1
    assert api.retrieve(made[0]).status in ("cancelling", "cancelled")
    rig.until(rig.finished(ids), step=rig.container.batch_poller().step)
    assert all(r.status is TaskStatus.success for r in rig.rows(ids))
