"""Hostile review of branch `money` (issue 43 part A): a worker killed between its reservation and
its settle. Its hold lapses only after ``2 * (PROCESSING_TIMEOUT_SECONDS + DOCLLM_LEASE_SECONDS)``
(21 min with the defaults; 20 min here, with a 3 s lease), though the reaper reclaims the dead attempt's lease
after one lease and hands the task back: the reclaim does not release the dead attempt's hold, so
under a cap sized for the work the task's next attempt is refused (and the BudgetGate stops the
fleet's claims: spent + held >= cap) for 21 minutes after every crash. Real redis-server and
SQLite, the container's processor, ledger and reaper."""

from __future__ import annotations

from pathlib import Path

from docllm.domain.errors import SpendCapReached
from docllm.domain.llm.ledger import document_requests
from tests.integration.test_batch_lane import DOC, Rig, make_settings
from tests.support.llm_server import FakeLLM


def test_review_the_reaper_reclaims_a_dead_attempt_but_its_hold_keeps_the_cap_for_21_minutes(
    tmp_path: Path, redis_url: str
) -> None:
    with FakeLLM() as llm:
        settings = make_settings(
            tmp_path, redis_url, llm, llm_batch=False, processing_timeout_seconds=600, spend_cap_usd_per_day=1000.0
        )
        rig = Rig(settings)
        [task_id] = rig.submit(1, priority="default")
        ledger, proc = rig.container.spend_ledger(), rig.container.processor()
        assert ledger.first is not None
        estimate = ledger.first.cost(document_requests("d0.md", DOC, None, settings.llm_max_chunk_chars))
        assert estimate
        rig.container.spend_budget().set_cap(1.5 * estimate)  # room for one attempt of this document
        # A worker claims and begins attempt 1, reserves it, and is SIGKILLed before any settle.
        delivery = proc.claim()
        assert delivery is not None
        attempt = proc.begin(delivery)
        assert attempt is not None and attempt.number == 1
        ledger.reserve_attempt(task_id, 1, "d0.md", DOC, None)
        # The reaper reclaims the dead lease (after one lease) and hands the task back.
        reaper = rig.container.reaper()
        rig.until(lambda: reaper.reap_once() > 0, timeout=4 * settings.lease_seconds + 10)
        # The next attempt reserves the same estimate.
        try:
            ledger.reserve_attempt(task_id, 2, "d0.md", DOC, None)
        except SpendCapReached as refused:
            raise AssertionError(
                f"attempt 2 refused after the reaper reclaimed attempt 1 ({refused}); attempt 1's hold "
                f"lapses only after {ledger.attempt_hold_ms / 60_000:.0f} min"
            ) from None
