"""A long document's chunks reviewed with bounded parallelism inside one attempt, for every
reviewer that sends chunks (one deployment, or several with fallback)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from docllm.domain.review.cache import current_recall
from docllm.domain.review.chat import chunk_report
from docllm.domain.review.chunking import Chunk
from docllm.domain.review.prompt import build_messages
from docllm.domain.review.report import validate_answer
from docllm.domain.review.rubric import Rubric

OneChunk = Callable[[Chunk, int, int], Awaitable[dict[str, Any]]]  # (chunk, part, parts) -> its report


async def review_chunks(chunks: list[Chunk], parallelism: int, one: OneChunk) -> list[dict[str, Any]]:
    """The chunks' reports in chunk order, whatever order they end in; up to ``parallelism`` at a
    time. The first chunk that fails cancels the others; a cancelled review cancels every request
    in flight, and no chunk not yet sent is sent (I11)."""
    if len(chunks) == 1:
        return [await one(chunks[0], 1, 1)]
    turns = asyncio.Semaphore(max(1, parallelism))

    async def turn(part: int, chunk: Chunk) -> dict[str, Any]:
        async with turns:
            return await one(chunk, part, len(chunks))

    parts: list[asyncio.Task[dict[str, Any]]] = []
    try:
        async with asyncio.TaskGroup() as group:
            parts = [group.create_task(turn(i, c)) for i, c in enumerate(chunks, 1)]
    except BaseExceptionGroup:
        # The error of the first failed chunk in document order (the domain's error, not a group).
        for part in parts:
            error = None if part.cancelled() else part.exception()
            if error is not None:
                raise error from None
        raise
    return [p.result() for p in parts]


CACHE_NAME = "(cache)"  # a routed report's deployment of a chunk the cache served: none was asked


def from_cache(
    answered_by: str, task_name: str, chunk: Chunk, part: int, parts: int, rubric: Rubric | None, named: bool = False
) -> dict[str, Any] | None:
    """The chunk's report from the review cache (issue 46), placed where the chunk is now, with no
    usage (nothing was asked); None: send it. ``named``: the report names deployments (a routed
    review's): this chunk's is ``CACHE_NAME``, as no deployment was asked. Only inside an
    attempt's review (``recalling``): ``docllm eval`` and ``docllm check`` measure the reviewer
    and never see the cache."""
    recall = current_recall()
    if recall is None or recall.fresh:
        return None
    key = recall.key(answered_by, build_messages(task_name, chunk.text, chunk.heading, part, parts, rubric), rubric)
    found = recall.hits.get(key)
    if found is None:
        return None
    try:
        answer = validate_answer(found.answer)  # an entry this version cannot read is asked again
    except ValueError:
        return None
    recall.hit(key, part)
    deployment = CACHE_NAME if named else None
    return chunk_report(answer, chunk, found.model, {"prompt_tokens": 0, "completion_tokens": 0}, deployment)


def remember(
    answered_by: str,
    model: str,
    messages: list[dict[str, str]],
    rubric: Rubric | None,
    answer: dict[str, Any],
    deployment: str | None,
    usage: dict[str, int],
) -> None:
    """An answer the LLM gave, for the attempt's commit to write to the review cache (under the
    key of the request that asked for it: ``messages`` before any repair)."""
    recall = current_recall()
    if recall is not None:
        recall.answer(recall.key(answered_by, messages, rubric), answer, model, deployment, usage)
