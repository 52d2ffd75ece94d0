"""Hostile review of the review cache (issue 46): tenants. The key has no tenant, so one tenant's
review is served to another, and the served report names the other tenant's task
(``"cached": [{"chunk": n, "task_id": <theirs>}]``): tenant B learns that tenant A submitted this
very document under this name, and the id to look it up by. Neither docs/ARCHITECTURE.md ("The
review cache") nor DEPLOY.md says the cache is shared across tenants. The rig of
tests/integration/test_review_cache.py (real openai client, test server, SQLite)."""

from __future__ import annotations

from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_review_cache import rig  # noqa: F401 - rig is a fixture


def test_a_tenants_report_never_names_another_tenants_task(rig):  # noqa: F811
    theirs = rig.review(tenant="acme")
    mine = rig.review(tenant="globex")
    assert theirs.status is TaskStatus.success and mine.status is TaskStatus.success
    named = {item["task_id"] for item in mine.result.get("cached", [])}
    assert theirs.task_id not in named, f"globex's report names acme's task {theirs.task_id}"
