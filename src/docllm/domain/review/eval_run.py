"""``docllm eval``: each golden document reviewed as a worker reviews a task, then compared with
its expected findings (domain/review/evaluation.py has the matching rule)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from docllm.domain.errors import DocllmError, EvaluationError
from docllm.domain.llm.usage import Usage, UsageMeter, metering
from docllm.domain.review.evaluation import Comparison, Expected, Score, compare
from docllm.domain.review.ports import DocumentReviewer, review_with
from docllm.domain.review.rubric import Rubric


@dataclass(frozen=True)
class Case:
    """A golden document: ``name`` is the task name its review gets (the file's name, as at submit)."""

    path: str
    name: str
    document: str
    expected: tuple[Expected, ...]
    rubric: Rubric | None = None
    false_alarms: tuple[Expected, ...] = ()  # findings a person dismissed as false alarms (docs/FINDINGS.md)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    comparison: Comparison
    usage: Usage

    @property
    def score(self) -> Score:
        return self.comparison.score


async def evaluate(reviewer: DocumentReviewer, cases: Sequence[Case]) -> list[CaseResult]:
    """One review per case, in order; a review that fails stops the run, naming the document."""
    results = []
    for case in cases:
        meter = UsageMeter()
        try:
            with metering(meter):  # the calls' cost, as an attempt counts it
                report = await review_with(reviewer, case.name, case.document, case.rubric)
        except DocllmError as exc:
            raise EvaluationError(f"{case.path}: the review failed: {exc}") from None
        usage = meter.total
        cost = usage.cost_usd if usage.calls else 0.0  # no call (offline), no cost
        comparison = compare(case.expected, report["findings"], cost, case.false_alarms)
        results.append(CaseResult(case, comparison, usage))
    return results


def total(results: Sequence[CaseResult]) -> Score:
    """The run's score, micro-averaged: every document's findings counted together."""
    return sum((r.score for r in results), Score())
