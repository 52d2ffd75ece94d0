"""Hostile review of the review cache (issue 46): expiry on the authority clock after a step.
docs/ARCHITECTURE.md: "a chunk is asked again at least every DOCLLM_REVIEW_CACHE_DAYS" and "An
older entry is never served". An entry written while the authority clock (Redis TIME) ran a year
ahead carries a stamp in the future: once the clock is put right, ``created_ms >= now - days``
holds for a year, so the entry is served long past its days, and the sweep never takes it.
The rig of tests/integration/test_review_cache.py (real openai client, test server, SQLite)."""

from __future__ import annotations

from docllm.domain.review.cache import DAY_MS
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_review_cache import rig  # noqa: F401 - rig is a fixture


def test_an_entry_stamped_by_a_clock_stepped_forward_still_expires_after_its_days(rig):  # noqa: F811
    true_now = rig.clock.now_ms()
    rig.clock.set(true_now + 365 * DAY_MS)  # the authority clock a year ahead, for a while
    first = rig.review(days=30)
    assert first.status is TaskStatus.success and rig.chats() == 5
    rig.clock.set(true_now)  # put right
    rig.clock.advance(31 * DAY_MS)  # the entry is now 31 days old: past DOCLLM_REVIEW_CACHE_DAYS=30
    again = rig.review(days=30)
    assert "cached" not in again.result, f"served {len(again.result['cached'])} chunks 31 days after they were written"
    assert rig.chats() == 10
