"""From the hostile review of branch `money` (issue 43 part A): a reservation is an estimate with a
fixed completion of ``COMPLETION_ESTIMATE_TOKENS`` (1000) a request, and no ``max_tokens`` is sent,
so an answer may cost more than was held (a reasoning model's hidden reasoning tokens are billed as
completion tokens; a repair request is not in the estimate). Settling counts the reported usage
whatever the hold was: the day's spend passes the cap by that answer's excess, a stated limit of the
ledger (docs/RELIABILITY.md, "The spend ledger"). What holds: the excess is that one answer's, the
next reservation does not fit, and no further task is charged or served. Real redis-server, SQLite,
the real ``openai`` client against the test server (one deployment, the single-URL settings)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from docllm.domain.llm.budget import micro
from docllm.domain.tasks.model import TaskStatus
from docllm.entrypoints.bootstrap import build_service
from tests.integration.test_batch_lane import Rig, make_settings
from tests.support.llm_server import FakeLLM, Reply, completion

CAP = 6.0  # USD a day: room for one document's estimate (about 4.4 USD at these prices), not two


def test_an_answer_dearer_than_its_estimate_passes_the_cap_by_its_excess_alone(tmp_path: Path, redis_url):
    with FakeLLM() as llm:
        rig = Rig(make_settings(tmp_path, redis_url, llm, llm_batch=False, spend_cap_usd_per_day=CAP))
        report = json.dumps({"findings": [], "summary": "Reviewed."})
        # 8000 completion tokens: what a reasoning model reports for one review (its reasoning included).
        llm.script(Reply(body=completion(report, prompt_tokens=300, completion_tokens=8000)))
        ids = rig.submit(3, priority="default")
        service = build_service(rig.container).start()
        try:
            rig.until(lambda: any(r.status is TaskStatus.success for r in rig.rows(ids)), 40)
            time.sleep(2.0)  # a claim after the settlement would start by now
            rows = rig.rows(ids)
        finally:
            assert service.wait(30)
        [done] = [r for r in rows if r.status is TaskStatus.success]
        view = rig.container.spend_budget().view()
        assert done.usage is not None and done.usage.cost_usd
        assert view.spent_micro == micro(done.usage.cost_usd) > micro(CAP)  # past the cap by that answer alone
        assert view.held_micro == 0
        others = [r for r in rows if r is not done]
        assert all(r.status is TaskStatus.pending and r.retry_count == 0 and r.usage is None for r in others)
        assert len(llm.requests) == 1  # nothing else was sent
