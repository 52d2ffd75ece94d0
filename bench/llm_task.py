"""The peers' LLM-bound job: one chat completion against the mock LLM, made as docllm's
OpenAIReviewer makes it (the same prompt for the same document, ``response_format`` json_schema, the
openai client with ``max_retries=0`` and a 60 s timeout) and its answer parsed as a docllm report.

The client's connection pool is sized to the worker's concurrency (``BENCH_LLM_CONCURRENCY``), as
a user of each peer would configure it; the openai default (1,000 connections, 100 kept alive)
would close and reopen connections above 100 in flight. With ``BENCH_LLM_SPLIT=1`` (the fair peer,
issue 24) those connections are split into clients of at most docllm's ``POOL_CONNECTIONS`` each,
taken in turn per request, as docllm's reviewer splits its own. ``BENCH_LLM_URL`` is the mock's
base URL.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from typing import Any

DOCUMENT = "# Bench document\n\nA short paragraph for the mock LLM to review.\n"
MODEL = "bench-model"
TIMEOUT_SECONDS = 60.0

_lock = threading.Lock()
_clients: dict[str, Any] = {}


def _pool_sizes() -> list[int]:
    """Connections per client: one pool of C, or (``BENCH_LLM_SPLIT``) docllm's split of C."""
    n = max(1, int(os.environ.get("BENCH_LLM_CONCURRENCY", "100")))
    if os.environ.get("BENCH_LLM_SPLIT") != "1":
        return [n]
    from docllm.adapters.llm.openai_reviewer import POOL_CONNECTIONS

    # The reviewer's split (OpenAIReviewer.__init__, not a function there yet): as few pools of at
    # most POOL_CONNECTIONS as hold C, the connections spread evenly over them.
    shards = max(1, math.ceil(n / POOL_CONNECTIONS))
    return [math.ceil(n / shards)] * shards


def _limits(size: int):
    import httpx2

    return httpx2.Limits(max_connections=size, max_keepalive_connections=size)


def sync_client():
    """The next ``openai.OpenAI`` of this process's clients, shared by every thread (thread-safe)."""
    with _lock:
        if "sync" not in _clients:
            import openai

            _clients["sync"] = itertools.cycle(
                [
                    openai.OpenAI(
                        base_url=os.environ["BENCH_LLM_URL"],
                        api_key="bench",
                        max_retries=0,
                        timeout=TIMEOUT_SECONDS,
                        http_client=openai.DefaultHttpxClient(limits=_limits(size), timeout=TIMEOUT_SECONDS),
                    )
                    for size in _pool_sizes()
                ]
            )
        return next(_clients["sync"])


def async_client():
    """The next ``openai.AsyncOpenAI`` of this process's clients (arq runs one loop)."""
    if "async" not in _clients:
        import openai

        _clients["async"] = itertools.cycle(
            [
                openai.AsyncOpenAI(
                    base_url=os.environ["BENCH_LLM_URL"],
                    api_key="bench",
                    max_retries=0,
                    timeout=TIMEOUT_SECONDS,
                    http_client=openai.DefaultAsyncHttpxClient(limits=_limits(size), timeout=TIMEOUT_SECONDS),
                )
                for size in _pool_sizes()
            ]
        )
    return next(_clients["async"])


def _request(task_id: int) -> dict[str, Any]:
    from docllm.domain.review.chat import STRICT_SCHEMA
    from docllm.domain.review.prompt import build_messages

    return {
        "model": MODEL,
        "messages": build_messages(f"bench-{task_id}", DOCUMENT),
        "response_format": STRICT_SCHEMA,  # what the reviewer asks a server first
    }


def _parse(response: Any) -> int:
    from docllm.domain.review.report import parse_answer

    return len(parse_answer(response.choices[0].message.content or "")["findings"])


def review(task_id: int) -> int:
    """One LLM call in a thread (Celery threads, Dramatiq); the number of findings."""
    return _parse(sync_client().chat.completions.create(**_request(task_id)))


async def review_async(task_id: int) -> int:
    """One LLM call on the event loop (arq)."""
    return _parse(await async_client().chat.completions.create(**_request(task_id)))
