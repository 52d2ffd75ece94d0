"""Hostile review of branch `money` (issue 43 part A, situation (6)): the start-time check refuses
an unpriced deployment only when a cap is in the *settings*. The fleet's cap held in Redis by
``docllm budget set --usd N`` (documented to override every process's setting) is not seen by it,
and the container then builds the ledger without a budget at all (nothing priced: nothing
counted), so every unpriced deployment spends past the operator's cap with the count at 0.
Real redis-server, SQLite, the real ``openai`` client against the test server."""

from __future__ import annotations

import time
from pathlib import Path

from docllm.domain.llm.deployments import Deployment
from docllm.domain.tasks.model import TaskStatus
from docllm.entrypoints.bootstrap import build_service
from tests.integration.test_batch_lane import Rig, make_settings
from tests.support.llm_server import FakeLLM


def test_review_an_unpriced_deployment_escapes_the_cap_set_by_docllm_budget_set(tmp_path: Path, redis_url):
    with FakeLLM() as llm:
        west = Deployment(name="west", base_url=llm.base_url, model="test-model", api_key="k")
        settings = make_settings(tmp_path, redis_url, llm, llm_deployments=(west,), llm_batch=False, llm_prices="")
        rig = Rig(settings)  # validated: no cap in the settings, so no price is needed
        rig.container.spend_budget().set_cap(0.001)  # what `docllm budget set --usd 0.001` does
        ids = rig.submit(6, priority="default")
        service = build_service(rig.container).start()
        try:
            end = time.monotonic() + 20
            while time.monotonic() < end and not rig.finished(ids)():
                time.sleep(0.1)
        finally:
            assert service.wait(30)
        served = [r for r in rig.rows(ids) if r.status is TaskStatus.success]
        view = rig.container.spend_budget().view()
        assert view.cap_micro == 1000 and view.source == "fleet"
        # The promise (issue 43 (6)): no deployment spends uncounted past a cap. Either the work is
        # refused (it cannot be priced) or what it spent is counted.
        assert not served or view.spent_micro > 0, (
            f"{len(served)} tasks served under a fleet cap of 0.001 USD, {view.spent_micro} counted"
        )
