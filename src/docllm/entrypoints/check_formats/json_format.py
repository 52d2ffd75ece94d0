"""For scripts: one JSON object; each document with its findings as the report has them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from docllm.domain.review.checking import Checked, failing


def render(results: Sequence[Checked], threshold: str) -> str:
    value = {
        "fail_on": threshold,
        "failing": failing(results, threshold),
        "documents": [
            {
                "path": r.path,
                "name": r.source.name,
                "summary": r.summary,
                **r.extra,
                "findings": r.findings,
                "dismissed": r.dismissed,  # each with its judgement under "dismissed"
                **({} if r.known is None else {"in_baseline": r.known}),
            }
            for r in results
        ],
    }
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"
