"""A usage the LLM reports beyond belief is ignored with a warning, never stored nor charged (issue 22)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from docllm.adapters.llm import openai_reviewer, provider_hints
from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.domain.llm.usage import UsageMeter, metering
from tests.support.llm_server import FakeLLM, Reply, completion

REPORT = json.dumps({"findings": [], "summary": "Checked."})


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 1e30, "completion_tokens": 5, "total_tokens": 1e30},
        {"prompt_tokens": 10, "completion_tokens": -3, "total_tokens": 7},
        {"prompt_tokens": "inf", "completion_tokens": 5, "total_tokens": 5},
        {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 10**30},
    ],
)
def test_absurd_token_counts_are_ignored_with_a_warning(monkeypatch, caplog, usage):
    monkeypatch.setattr(provider_hints, "_warned", set())
    meter = UsageMeter()
    with FakeLLM() as llm:
        llm.script(Reply(body=completion(REPORT) | {"usage": usage}))
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", 5)

        async def review() -> dict:
            with metering(meter):
                return await reviewer.review("install", "# Guide\n\nRun it.\n")

        with caplog.at_level(logging.WARNING):
            report = asyncio.run(review())
    assert report["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
    assert (meter.total.calls, meter.total.prompt_tokens, meter.total.completion_tokens) == (1, 0, 0)
    warnings = [r for r in caplog.records if r.name in (openai_reviewer.__name__, provider_hints.__name__)]
    assert len(warnings) == 1 and "usage" in warnings[0].getMessage()
