"""OfflineReviewer: the embedded default DocumentReviewer, rules instead of a model.

Deterministic: the same document always gives the same report, findings in document order.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from docllm.adapters.offline.checks import CHECKS, Doc
from docllm.adapters.offline.checks.rubric import rubric_checks
from docllm.domain.report import SEVERITIES, make_report, require_reviewable
from docllm.domain.rubric import Rubric


class OfflineReviewer:
    name = "offline"
    model = "offline-rules-1"

    async def check(self) -> None:
        """Nothing to configure."""

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        return self.review_now(task_name, document, rubric)

    def review_now(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        """The checks run in a few milliseconds, so the event loop runs them itself. A rubric's
        rules run too (its instructions are for a model, not for these rules)."""
        doc = Doc.parse(require_reviewable(document))
        checks = list(CHECKS) if rubric is None else rubric_checks(rubric, task_name, CHECKS)
        found = [(f, order) for order, check in enumerate(checks) for f in check(doc)]
        findings = [f for f, _ in sorted(found, key=lambda x: (x[0]["location"]["line_start"] or 0, x[1]))]
        return make_report(findings, _summary(findings, doc.last_line), self.name, self.model)


def _summary(findings: list[dict[str, Any]], lines: int) -> str:
    if not findings:
        return f"Offline checks found no problems in {lines} lines."
    counts = Counter(f["severity"] for f in findings)
    by_severity = ", ".join(f"{counts[s]} {s}" for s in reversed(SEVERITIES) if counts[s])
    return f"Offline checks found {len(findings)} problem(s) in {lines} lines ({by_severity})."
