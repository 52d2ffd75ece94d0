"""A reviewer that takes its time: stands in for an LLM's latency in demos and benchmarks."""

from __future__ import annotations

import asyncio
from typing import Any

from docllm.domain.review.ports import DocumentReviewer, review_with
from docllm.domain.review.rubric import Rubric


class SlowReviewer:
    def __init__(self, inner: DocumentReviewer, seconds: float):
        self.inner, self.seconds = inner, seconds
        self.name = inner.name

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        await asyncio.sleep(self.seconds)
        return await review_with(self.inner, task_name, document, rubric)

    async def check(self) -> None:
        await self.inner.check()
