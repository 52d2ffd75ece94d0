"""The ports of review: the reviewer (the LLM or the offline checks) and the rubric catalog.

Every time in these signatures is the authority's time (the Redis server's clock, ARCHITECTURE.md,
Clocks) in milliseconds; no port takes or returns a worker's wall clock.
"""

from __future__ import annotations

from typing import Any, Protocol

from docllm.domain.review.rubric import Rubric


class DocumentReviewer(Protocol):
    """The LLM (or the offline checks): a document in, a report (see ``domain.review.report``) out.

    Raises TransientError (retry later), PermanentError (the task fails) or ConfigurationError
    (the deployment is wrong; stop claiming).
    """

    name: str

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        """Cancelling the call cancels the request in flight and sends no further one (I11).
        Each LLM call is reported with ``docllm.domain.llm.usage.record`` (the attempt's meter).
        ``rubric``: the task's (the offline reviewer runs its rules, the LLM's prompt carries its
        instructions); callers pass it only when the task names one, so None is the old call."""

    async def check(self) -> None:
        """Cheap probe of the configuration; raises ConfigurationError when it is wrong."""


async def review_with(
    reviewer: DocumentReviewer, task_name: str, document: str, rubric: Rubric | None
) -> dict[str, Any]:
    """How every caller calls a reviewer: the rubric is passed only when there is one, so a
    reviewer written before rubrics (a test double, a wrapper) gets exactly the call it always got."""
    if rubric is None:
        return await reviewer.review(task_name, document)
    return await reviewer.review(task_name, document, rubric)


class RubricCatalog(Protocol):
    """Where rubrics are found by name (``DOCLLM_RUBRICS_DIR``)."""

    def get(self, name: str) -> Rubric:
        """The rubric, validated; RubricError when there is none of that name or it is invalid."""
