"""A task's rubric on its way to the LLM: from the row, through an attempt, to the request the
scripted server receives, where its instructions sit in the system message and never between the
document's markers; the committed report records the rubric and keeps the check the model named."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.rubrics.catalog import YamlRubricCatalog
from docllm.domain.review.prompt import SYSTEM_PROMPT
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, Reply
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rubrics"
INSTRUCTION = "Every numbered step must say what the reader sees when it worked."
CHECK = "rubric:install-guide/steps-say-result"


def run_task(llm: FakeLLM, rubric: str | None) -> dict:
    """Submit the golden document, run one attempt against ``llm``, return its committed row."""
    clock, catalog = ManualClock(), YamlRubricCatalog(str(EXAMPLES))
    queue, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", 5)
    proc = TaskProcessor(queue, repo, reviewer, clock, RetryPolicy(), LeasePolicy(), "w1", rubrics=catalog)
    doc = (EXAMPLES / "golden" / "acmedb-install.md").read_text()
    task = submit(repo, queue, "acmedb-install.md", doc, rubric=rubric, rubrics=catalog)
    delivery = proc.claim()
    assert delivery is not None
    attempt = proc.begin(delivery)
    assert attempt is not None

    async def review():
        try:
            return await proc.review(attempt)
        finally:
            await reviewer.close()

    assert proc.finish(attempt, asyncio.run(review()))
    row = repo.get(task.task_id)
    assert row is not None
    assert row.status is TaskStatus.success, row.error
    return {"result": row.result, "messages": llm.requests[-1]["body"]["messages"]}


def split(messages: list[dict]) -> tuple[str, str, str]:
    """The system message, the user message outside the document's markers, and inside them."""
    system, user = messages[0]["content"], messages[1]["content"]
    begin = re.search(r"^<<<DOCUMENT (\w+)>>>$", user, re.M)
    assert begin is not None
    end = user.index(f"<<<END DOCUMENT {begin.group(1)}>>>")
    return system, user[: begin.start()] + user[end:], user[begin.end() : end]


def test_the_rubrics_instructions_reach_the_system_message_and_never_the_documents_data():
    finding = {
        "check": CHECK,
        "category": "completeness",
        "severity": "low",
        "location": {"heading": "Install", "line_start": 12, "line_end": 12},
        "quote": "1. Download the package",
        "message": "The step does not say what the reader sees.",
    }
    with FakeLLM() as llm:
        llm.script(Reply(content=json.dumps({"findings": [finding], "summary": "One gap."})))
        seen = run_task(llm, "install-guide")

    system, around, inside = split(seen["messages"])
    assert system.startswith(SYSTEM_PROMPT)
    assert INSTRUCTION in " ".join(system.split()) and f'"{CHECK}"' in system
    assert "install-guide@1" in system
    for part in (around, inside):
        assert "steps-say-result" not in part and "reader sees" not in part
    report = seen["result"]
    assert report["rubric"] == "install-guide@1"
    assert [f.get("check") for f in report["findings"]] == [CHECK]


def test_a_task_without_a_rubric_sends_todays_prompt_and_records_none():
    with FakeLLM() as llm:
        seen = run_task(llm, None)
    assert seen["messages"][0]["content"] == SYSTEM_PROMPT
    assert "rubric" not in seen["result"]
