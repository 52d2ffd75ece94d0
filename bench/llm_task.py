"""The peers' LLM-bound job: one chat completion against the mock LLM, made as docllm's
OpenAIReviewer makes it (the same prompt for the same document, ``response_format`` json_schema, the
openai client with ``max_retries=0`` and a 60 s timeout) and its answer parsed as a docllm report.

The client's connection pool is sized to the worker's concurrency (``BENCH_LLM_CONCURRENCY``), as
a user of each peer would configure it; the openai default (1,000 connections, 100 kept alive)
would close and reopen connections above 100 in flight. ``BENCH_LLM_URL`` is the mock's base URL.
"""

from __future__ import annotations

import os
import threading
from typing import Any

DOCUMENT = "# Bench document\n\nA short paragraph for the mock LLM to review.\n"
MODEL = "bench-model"
TIMEOUT_SECONDS = 60.0

_lock = threading.Lock()
_clients: dict[str, Any] = {}


def _limits():
    import httpx2

    n = max(1, int(os.environ.get("BENCH_LLM_CONCURRENCY", "100")))
    return httpx2.Limits(max_connections=n, max_keepalive_connections=n)


def sync_client():
    """One ``openai.OpenAI`` per process, shared by every thread (it is thread-safe)."""
    with _lock:
        if "sync" not in _clients:
            import openai

            _clients["sync"] = openai.OpenAI(
                base_url=os.environ["BENCH_LLM_URL"],
                api_key="bench",
                max_retries=0,
                timeout=TIMEOUT_SECONDS,
                http_client=openai.DefaultHttpxClient(limits=_limits(), timeout=TIMEOUT_SECONDS),
            )
        return _clients["sync"]


def async_client():
    """One ``openai.AsyncOpenAI`` per event loop's process (arq runs one loop)."""
    if "async" not in _clients:
        import openai

        _clients["async"] = openai.AsyncOpenAI(
            base_url=os.environ["BENCH_LLM_URL"],
            api_key="bench",
            max_retries=0,
            timeout=TIMEOUT_SECONDS,
            http_client=openai.DefaultAsyncHttpxClient(limits=_limits(), timeout=TIMEOUT_SECONDS),
        )
    return _clients["async"]


def _request(task_id: int) -> dict[str, Any]:
    from docllm.adapters.llm.openai_reviewer import STRICT_SCHEMA
    from docllm.domain.prompt import build_messages

    return {
        "model": MODEL,
        "messages": build_messages(f"bench-{task_id}", DOCUMENT),
        "response_format": STRICT_SCHEMA,  # what the reviewer asks a server first
    }


def _parse(response: Any) -> int:
    from docllm.domain.report import parse_answer

    return len(parse_answer(response.choices[0].message.content or "")["findings"])


def review(task_id: int) -> int:
    """One LLM call in a thread (Celery threads, Dramatiq); the number of findings."""
    return _parse(sync_client().chat.completions.create(**_request(task_id)))


async def review_async(task_id: int) -> int:
    """One LLM call on the event loop (arq)."""
    return _parse(await async_client().chat.completions.create(**_request(task_id)))
