"""A reviewer that takes its time: stands in for an LLM's latency in demos and benchmarks."""

from __future__ import annotations

import asyncio
from typing import Any

from docllm.domain.ports import DocumentReviewer


class SlowReviewer:
    def __init__(self, inner: DocumentReviewer, seconds: float):
        self.inner, self.seconds = inner, seconds
        self.name = inner.name

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        await asyncio.sleep(self.seconds)
        return await self.inner.review(task_name, document)

    async def check(self) -> None:
        await self.inner.check()
