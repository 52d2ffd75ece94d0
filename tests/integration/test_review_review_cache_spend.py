"""Hostile review of the review cache (issue 46) and the spend ledger (I16): the recall counts a
row as a hit (its chunk left out of the reservation) when the reviewer will not serve it (an
answer ``validate_answer`` refuses: "an entry this version cannot read is asked again"). The
chunk is then sent with nothing reserved for it, past DOCLLM_TASK_MAX_COST_USD. The rig of
tests/integration/test_review_cache.py (real openai client, test server, SQLite)."""

from __future__ import annotations

import json

import fakeredis
from sqlalchemy import text

from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.domain.llm.ledger import Priced
from docllm.domain.llm.spend_ledger import SpendLedger
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_review_cache import CHUNK_CHARS, PRICE, rig  # noqa: F401 - rig is a fixture

UNREADABLE = {"findings": [{"category": "clarity"}], "summary": "written by a reader this version refuses"}


def test_an_entry_the_reviewer_will_not_serve_is_reserved_and_held_to_the_task_cap(rig):  # noqa: F811
    first = rig.review()  # fills the cache: 5 chunks, 5 requests
    assert first.status is TaskStatus.success and rig.chats() == 5
    cost = first.usage.cost_usd
    assert cost and cost > 0
    with rig.engine.begin() as conn:  # every entry now one the reviewer refuses (asked again)
        conn.execute(text("UPDATE review_cache SET answer = :a"), {"a": json.dumps(UNREADABLE)})
    budget = RedisSpendBudget(fakeredis.FakeRedis(), "docllm", rig.clock, cap_usd=0.0)
    rig.ledger = SpendLedger(budget, [Priced("default", "test-model", PRICE)], cost / 10, CHUNK_CHARS)
    second = rig.review()
    asked = rig.chats() - 5
    # Either nothing was sent (the task is over its cap: fails at once) or what was sent was reserved.
    assert asked == 0 or second.status is TaskStatus.failed, (
        f"{asked} chunks sent with nothing reserved; the task cost {second.usage and second.usage.cost_usd}"
        f" against a cap of {cost / 10}"
    )
