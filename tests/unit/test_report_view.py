"""``docllm show`` names the versions that made a report, and only those the report records."""

from __future__ import annotations

from rich.console import Console

from docllm.domain.review.report import make_report
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.entrypoints.report_view import render_task


def shown(result: dict) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(render_task(Task(task_id=1, task_name="doc", status=TaskStatus.success, result=result), 3))
    return console.export_text()


def test_the_versions_a_report_records_are_shown():
    report = {**make_report([], "Fine.", "openai", "m", prompt_version=4, rubric_version="2"), "rubric": "team@2"}
    assert "tokens 0 in / 0 out, rubric team@2, prompt v4, schema v1" in shown(report)


def test_a_report_stored_before_versions_shows_none():
    old = {k: v for k, v in make_report([], "Fine.", "offline", "m").items() if not k.endswith("_version")}
    assert "tokens 0 in / 0 out\n" in shown(old) and " v" not in shown(old).split("tokens")[1]


def test_the_deployment_that_served_each_chunk_is_shown():
    parts = [make_report([], "", "openai", "m", deployments=[name]) for name in ("east", "east", "west")]
    from docllm.domain.review.report import merge_reports

    merged = merge_reports(parts)
    assert merged["deployments"] == ["east", "east", "west"]
    assert "served by east (chunks 1-2), west (chunk 3)" in shown(merged)
    assert "served by" not in shown(make_report([], "Fine.", "openai", "m"))  # one deployment: not recorded
