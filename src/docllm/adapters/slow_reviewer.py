"""A reviewer that takes its time: stands in for an LLM's latency in demos and benchmarks."""

from __future__ import annotations

import time
from typing import Any

from docllm.domain.ports import DocumentReviewer


class SlowReviewer:
    def __init__(self, inner: DocumentReviewer, seconds: float):
        self.inner, self.seconds = inner, seconds
        self.name = inner.name

    def review(self, task_name: str, document: str) -> dict[str, Any]:
        time.sleep(self.seconds)
        return self.inner.review(task_name, document)

    def check(self) -> None:
        self.inner.check()
