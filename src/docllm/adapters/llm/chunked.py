"""A long document's chunks reviewed with bounded parallelism inside one attempt, for every
reviewer that sends chunks (one deployment, or several with fallback)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from docllm.domain.review.chunking import Chunk

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
