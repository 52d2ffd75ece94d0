"""A batch asks what the realtime reviewer asks and makes the report it makes (issue 28): the same
request bodies chunk by chunk (on the first rung), and from the same answers the same report."""

from __future__ import annotations

import asyncio
import json

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.domain.batches.lines import request_lines
from docllm.domain.batches.results import State, read_results
from docllm.domain.review.chunking import split_markdown
from tests.support.llm_server import FakeLLM, smart_answer, with_cached

DOCUMENT = "# Guide\n\nIntro line.\n\n## Install\n\nRun it.\n\n## Use\n\nCall it.\n" + "More words here.\n" * 20
MAX = 120


def test_batch_lines_are_the_realtime_requests_and_their_answers_the_realtime_report():
    with FakeLLM(cached_tokens=3) as llm:
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", 5, max_chunk_chars=MAX, chunk_parallelism=1)
        realtime = asyncio.run(reviewer.review("install guide", DOCUMENT))
        asyncio.run(reviewer.close())
        sent = [r["body"] for r in llm.requests if r["path"] == "/v1/chat/completions"]
    lines = request_lines(7, 2, "install guide", DOCUMENT, None, "test-model", MAX)
    assert len(lines) == len(sent) == realtime["chunks"] >= 3
    assert [line["body"] for line in lines] == sent

    output = [
        json.dumps(
            {
                "id": f"batch_req_{i}",
                "custom_id": line["custom_id"],
                "response": {
                    "status_code": 200,
                    "request_id": f"req_{i}",
                    "body": with_cached(smart_answer(line["body"]), 3, "prompt_tokens_details.cached_tokens"),
                },
                "error": None,
            }
        )
        for i, line in enumerate(reversed(lines))  # a batch's output comes in any order
    ]
    result = read_results(output, {7: (2, len(lines))}).tasks[7]
    assert result.state is State.answered
    assert result.report(split_markdown(DOCUMENT, MAX), "test-model") == realtime
    assert result.tokens.cached == 3 * len(lines)
    assert result.tokens.prompt == realtime["usage"]["prompt_tokens"]
