"""``docllm eval``'s run: the container's reviewer over the cases, on one event loop, closed after."""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import providers

from docllm.container import Container
from docllm.domain.review.eval_run import Case, CaseResult, evaluate


async def run_eval(container: Container, cases: Sequence[Case]) -> tuple[list[CaseResult], str, str | None]:
    """The results, the reviewer's name and model. The fleet's rate limits live in Redis, which an
    eval does not use: its requests are paced by the provider's answers alone."""
    container.rate_limiter.override(providers.Object(None))
    container.routes.override(providers.Object(None))  # several deployments: the first one, without Redis
    reviewer = container.reviewer()  # built on the loop: the LLM client's pools belong to it
    try:
        return await evaluate(reviewer, cases), reviewer.name, getattr(reviewer, "model", None)
    finally:
        close = getattr(reviewer, "close", None)
        if close is not None:
            await close()
