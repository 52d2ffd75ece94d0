"""OfflineReviewer: the embedded default DocumentReviewer, rules instead of a model.

Deterministic: the same document always gives the same report, findings in document order.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from docllm.adapters.offline.checks import CHECKS, Doc
from docllm.adapters.offline.checks.rubric import rubric_checks
from docllm.domain.review.report import SEVERITIES, make_report, require_reviewable
from docllm.domain.review.rubric import Rubric

# A document this large may take the parsers seconds (a hostile one, up to their bounds), which the
# event loop's heartbeats cannot wait; smaller ones take milliseconds and run on the loop.
THREAD_ABOVE_CHARS = 64 * 1024


class OfflineReviewer:
    name = "offline"
    model = "offline-rules-1"

    async def check(self) -> None:
        """Nothing to configure."""

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        if len(document) > THREAD_ABOVE_CHARS:  # up to the parsers' time bounds (checks/bounds.py):
            return await asyncio.to_thread(self.review_now, task_name, document, rubric)  # not on the loop
        return self.review_now(task_name, document, rubric)

    def review_now(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        """A rubric's rules run too (its instructions are for a model, not for these rules)."""
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
