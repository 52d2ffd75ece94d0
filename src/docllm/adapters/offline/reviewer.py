"""OfflineReviewer: the embedded default DocumentReviewer, rules instead of a model.

Deterministic: the same document always gives the same report, findings in document order.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from docllm.adapters.offline.checks import CHECKS, Doc
from docllm.domain.report import SEVERITIES, make_report, require_reviewable


class OfflineReviewer:
    name = "offline"
    model = "offline-rules-1"

    async def check(self) -> None:
        """Nothing to configure."""

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        return self.review_now(task_name, document)

    def review_now(self, task_name: str, document: str) -> dict[str, Any]:
        """The checks run in a few milliseconds, so the event loop runs them itself."""
        doc = Doc.parse(require_reviewable(document))
        found = [(f, order) for order, check in enumerate(CHECKS) for f in check(doc)]
        findings = [f for f, _ in sorted(found, key=lambda x: (x[0]["location"]["line_start"] or 0, x[1]))]
        return make_report(findings, _summary(findings, doc.last_line), self.name, self.model)


def _summary(findings: list[dict[str, Any]], lines: int) -> str:
    if not findings:
        return f"Offline checks found no problems in {lines} lines."
    counts = Counter(f["severity"] for f in findings)
    by_severity = ", ".join(f"{counts[s]} {s}" for s in reversed(SEVERITIES) if counts[s])
    return f"Offline checks found {len(findings)} problem(s) in {lines} lines ({by_severity})."
