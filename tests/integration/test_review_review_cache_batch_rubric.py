"""Hostile review of the review cache (issue 46): a batch member's answers are written under the
rubric read when the poller applies the batch, not the rubric its lines were built with. A rubric
edited (version bumped, new instructions) while a bulk batch runs: the old rubric's answers go into
the cache under the new rubric's key, and a realtime review with the new rubric is served them
without its new instructions ever reaching the LLM. The batch lane's rig (test_batch_lane.py)."""

from __future__ import annotations

import os
import time

import pytest

from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.producer import submit
from tests.integration.test_batch_lane import DOC, rig_for, run_until_finished, running, submitted_batch  # noqa: F401 - rig_for is a fixture

V1 = "version: 1\nchecks:\n  - {id: tone, kind: instruction, text: Flag marketing words.}\n"
V2 = "version: 2\nchecks:\n  - {id: tone, kind: instruction, text: Flag every passive sentence.}\n"


def chats(llm) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in llm.requests)


@pytest.mark.parametrize("database", ["sqlite", "mariadb"])
def test_a_rubric_bumped_while_a_batch_runs_is_not_served_the_old_rubrics_answers(rig_for, tmp_path, request, database):  # noqa: F811
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    (rubrics / "house.yaml").write_text(V1)
    url = request.getfixturevalue("mysql_url") if database == "mariadb" else ""
    rig, llm = rig_for(url, rubrics_dir=str(rubrics), batch_max_tasks=1)
    catalog = rig.container.rubrics()
    bulk = [submit(rig.repo, rig.queue, "d.md", DOC, rubric="house", rubrics=catalog, priority="bulk").task_id]
    ref = submitted_batch(rig, bulk)
    sent = b"".join(f.content for f in llm.batches.files.values())
    assert b"Flag marketing words." in sent and b"passive" not in sent  # its lines carry the v1 instructions
    # The operator edits the rubric (a new version, new words) while the provider runs the batch.
    time.sleep(0.05)
    (rubrics / "house.yaml").write_text(V2)
    later = time.time() + 5
    os.utime(rubrics / "house.yaml", (later, later))
    poller = rig.container.batch_poller()
    rig.until(rig.finished(bulk), step=poller.step)
    assert rig.rows(bulk)[0].status is TaskStatus.success
    assert rig.store.get(ref) is not None
    asked = chats(llm)
    realtime = [
        submit(rig.repo, rig.queue, "d.md", DOC, rubric="house", rubrics=catalog, priority="interactive").task_id
    ]
    run_until_finished(rig, realtime)
    row = rig.rows(realtime)[0]
    assert row.status is TaskStatus.success, row.error
    assert row.result["rubric_version"] == "2"
    # The v2 instructions were never sent to the LLM for this document: it must be asked.
    assert "cached" not in row.result, row.result["cached"]
    assert chats(llm) == asked + 1
