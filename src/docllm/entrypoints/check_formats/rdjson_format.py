"""reviewdog's Diagnostic Format (rdjson): ``reviewdog -f=rdjson`` posts it as review comments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from docllm.domain.review.checking import Checked
from docllm.entrypoints.check_formats.rules import RDJSON_SEVERITY, lines, rule_id


def _diagnostic(path: str, f: dict[str, Any]) -> dict[str, Any]:
    start, end = lines(f)
    location: dict[str, Any] = {"path": path}
    if start:
        location["range"] = {"start": {"line": start}, "end": {"line": end or start}}
    d: dict[str, Any] = {
        "message": f["message"],
        "location": location,
        "severity": RDJSON_SEVERITY[f["severity"]],
        "code": {"value": rule_id(f)},
    }
    if f.get("suggestion"):
        d["message"] += f" ({f['suggestion']})"
    return d


def render(results: Sequence[Checked], threshold: str) -> str:
    value = {
        "source": {"name": "docllm"},
        "severity": "WARNING",
        "diagnostics": [_diagnostic(r.path, f) for r in results for f in r.findings],
    }
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"
