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

import pytest

from docllm.domain.batches import BatchState
from docllm.domain.model import TaskStatus
from tests.integration.test_batch_lane import DOC, Rig, make_settings, rig_for, submitted_batch  # noqa: F401
from tests.support.llm_server import FakeLLM

CHUNK = 400  # DOCLLM_LLM_MAX_CHUNK_CHARS when the batch is made: three chunks of the document below


def three_sections(i: int) -> str:
    return "\n".join(f"## Part {n}\n\n" + "Plain steady text. " * 15 + "\n" for n in range(1, 4))


def test_a_chunk_size_changed_while_a_batch_is_out_is_applied_as_the_batch_was_made(rig_for, tmp_path, redis_url):
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
