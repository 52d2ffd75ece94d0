"""Hostile review of branch `money` (issue 43 part A): a reservation is an estimate with a fixed
completion of ``COMPLETION_ESTIMATE_TOKENS`` (1000) a request, and no ``max_tokens`` is sent, so
nothing bounds what an answer may cost above it: a reasoning model's hidden reasoning tokens are
billed as completion tokens (thousands a call), and a repair request is not in the estimate at all.
Settling counts the reported usage whatever the hold was. Real redis-server, SQLite, the real
``openai`` client against the test server (one deployment, the single-URL settings)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from docllm.domain.budget import micro
from docllm.domain.model import TaskStatus
from docllm.entrypoints.bootstrap import build_service
from tests.integration.test_batch_lane import Rig, make_settings
from tests.support.llm_server import FakeLLM, Reply, completion

CAP = 6.0  # USD a day: room for one document's estimate (about 4.4 USD at these prices), not two


def test_review_an_answer_dearer_than_its_estimate_passes_the_fleet_cap_with_nothing_held(tmp_path: Path, redis_url):
    with FakeLLM() as llm:
        rig = Rig(make_settings(tmp_path, redis_url, llm, llm_batch=False, spend_cap_usd_per_day=CAP))
        report = json.dumps({"findings": [], "summary": "Reviewed."})
        # 8000 completion tokens: what a reasoning model reports for one review (its reasoning included).
        llm.script(Reply(body=completion(report, prompt_tokens=300, completion_tokens=8000)))
        [task_id] = rig.submit(1, priority="default")
        service = build_service(rig.container).start()
        try:
            rig.until(rig.finished([task_id]), 40)
            time.sleep(0.5)
        finally:
            assert service.wait(30)
        row = rig.repo.get(task_id)
        assert row.status is TaskStatus.success, row.error
        view = rig.container.spend_budget().view()
        # The invariant: the day's counted spend never passes a cap by more than the
        # reservations in flight allow. Nothing is in flight; one reservation was granted under the cap.
        assert view.spent_micro <= micro(CAP) + view.held_micro, (
            f"spent {view.spent_micro / 1e6:.2f} USD under a cap of {CAP} USD, {view.held_micro} held"
        )
