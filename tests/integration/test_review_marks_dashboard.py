"""Hostile review of branch `marks` (issue 46): the dashboard's dismiss button on a database that
was not upgraded yet (a new dashboard beside an old database during a rolling upgrade), on real
Redis and SQLite. docs/FINDINGS.md: a database without the table has no marks, and writing one
says "run docllm init-db"; the dashboard answers refused judgements with a line naming why."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace

from docllm.domain.review.report import finding, make_report
from docllm.entrypoints.bootstrap import build_container
from docllm.entrypoints.dashboard.app import Sources, create_app
from docllm.entrypoints.snapshot import stats_of
from docllm.settings import Settings


def test_review_dismiss_on_a_database_before_0012_names_the_fix(redis_url: str, tmp_path):
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.domain.tasks.producer import submit

    settings = replace(
        Settings.from_env({}),
        redis_url=redis_url,
        database_url=f"sqlite:///{tmp_path / 'old.db'}",
        queue_prefix=f"m{uuid.uuid4().hex[:6]}",
    )
    c = build_container(settings, log=False)
    upgrade_schema(c.engine(), "0011")  # the database of 0.11: no finding_marks yet
    repo, queue = c.repository(), c.queue()
    task = submit(repo, queue, "guide.md", "# Guide\n\ntext\n")
    delivery = queue.claim("w1", 30_000)
    assert delivery is not None
    row = repo.start_attempt(task.task_id, delivery.token).task
    assert row is not None
    report = make_report(
        [finding("style", "low", "Passive.", heading="Guide", line_start=3, quote="text")], "", "offline", "rules"
    )
    assert repo.commit(task.task_id, row.attempt, report) and queue.ack(delivery.token)
    sources = Sources(
        repo, queue, lambda: stats_of(c), None, c.events(), sessions=c.dashboard_sessions(), marks=c.marks()
    )
    client = create_app(sources).test_client()
    try:
        page = client.get(f"/tasks/{task.task_id}")
        assert page.status_code == 200
        token = re.search(r'name="csrf" value="([^"]+)"', page.get_data(as_text=True))
        assert token
        answer = client.post(
            f"/tasks/{task.task_id}/findings/1/dismiss", data={"csrf": token.group(1), "reason": "accepted"}
        )
        body = answer.get_data(as_text=True)
        assert answer.status_code != 500 and "docllm init-db" in body, (answer.status_code, body[:300])
    finally:
        c.shutdown_resources()
