"""The review report stored in a task's ``result``: its schema, validation, building and merging.

A finding's ``location`` is ``{"heading": "Install > Linux", "line_start": 12, "line_end": 14}``:
the heading path (" > "-joined, "" before the first heading) and whole-document lines (1-based),
either line None where unknown. Its optional ``check`` names the rubric check that produced it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from docllm.domain.errors import PermanentError

CATEGORIES = (
    "correctness",
    "consistency",
    "completeness",
    "clarity",
    "formatting",
    "links",
    "code",
    "style",
    "security",
    "other",
)
SEVERITIES = ("low", "medium", "high", "critical")
REVIEWERS = ("openai", "offline")
_TEXT_FIELDS = ("quote", "message", "suggestion")
_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S)


def require_reviewable(document: Any) -> str:
    """The document, or PermanentError when no reviewer could review it (empty, or binary)."""
    if not isinstance(document, str) or not document.strip():
        raise PermanentError("the document is empty: nothing to review")
    if "\x00" in document:
        raise PermanentError("the document contains NUL bytes: it is not text")
    return document


def location(heading: str = "", line_start: int | None = None, line_end: int | None = None) -> dict[str, Any]:
    if line_start is not None and (line_end is None or line_end < line_start):
        line_end = line_start
    return {"heading": heading, "line_start": line_start, "line_end": line_end}


def finding(
    category: str,
    severity: str,
    message: str,
    *,
    heading: str = "",
    line_start: int | None = None,
    line_end: int | None = None,
    quote: str = "",
    suggestion: str = "",
) -> dict[str, Any]:
    return {
        "category": category,
        "severity": severity,
        "location": location(heading, line_start, line_end),
        "quote": quote,
        "message": message,
        "suggestion": suggestion,
    }


def make_report(
    findings: list[dict[str, Any]],
    summary: str,
    reviewer: str,
    model: str,
    chunks: int = 1,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    usage = usage or {}
    return validate_report(
        {
            "findings": findings,
            "summary": summary,
            "reviewer": reviewer,
            "model": model,
            "chunks": chunks,
            "usage": {
                "prompt_tokens": usage.get("prompt_tokens", 0),
                "completion_tokens": usage.get("completion_tokens", 0),
            },
        }
    )


def _line(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"{field} must be a positive integer or null, got {value!r}")
    if int(value) < 1:
        raise ValueError(f"{field} must be a positive integer or null, got {value!r}")
    return int(value)


def _location(value: Any, where: str) -> dict[str, Any]:
    if value is None or isinstance(value, str):  # a model may answer a bare section name
        return location(value or "")
    if not isinstance(value, dict):
        raise ValueError(f"{where}.location must be an object, got {type(value).__name__}")
    heading = value.get("heading") or ""
    if not isinstance(heading, str):
        raise ValueError(f"{where}.location.heading must be a string")
    start = _line(value.get("line_start"), f"{where}.location.line_start")
    return location(heading, start, _line(value.get("line_end"), f"{where}.location.line_end"))


def _finding(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object, got {type(value).__name__}")
    out = dict(value)  # unknown fields of a model's finding are kept as given
    for field, allowed in (("category", CATEGORIES), ("severity", SEVERITIES)):
        raw = value.get(field)
        norm = raw.strip().lower() if isinstance(raw, str) else raw
        if norm not in allowed:
            raise ValueError(f"{where}.{field} must be one of {', '.join(allowed)}; got {raw!r}")
        out[field] = norm
    for field in _TEXT_FIELDS:
        text = "" if value.get(field) is None else value[field]
        if not isinstance(text, str):
            raise ValueError(f"{where}.{field} must be a string, got {type(text).__name__}")
        out[field] = text
    if not out["message"].strip():
        raise ValueError(f"{where}.message must not be empty")
    # Which check produced it ("rubric:install-guide/banned-terms"); reports before rubrics have none.
    if value.get("check") is None:
        out.pop("check", None)
    elif not isinstance(value["check"], str):
        raise ValueError(f"{where}.check must be a string, got {type(value['check']).__name__}")
    out["location"] = _location(value.get("location"), where)
    return out


def validate_answer(obj: Any) -> dict[str, Any]:
    """Check and normalise the part a reviewer writes: ``{"findings": [...], "summary": "..."}``."""
    if not isinstance(obj, dict):
        raise ValueError(f"the report must be a JSON object, got {type(obj).__name__}")
    findings = obj.get("findings")
    if not isinstance(findings, list):
        raise ValueError("findings must be a list")
    summary = obj.get("summary", "")
    if not isinstance(summary, str):
        raise ValueError("summary must be a string")
    return {"findings": [_finding(f, f"findings[{i}]") for i, f in enumerate(findings)], "summary": summary}


def parse_answer(text: str) -> dict[str, Any]:
    """A model's answer text to a valid answer; a fenced ```json block is accepted as well."""
    text = text.strip()
    if not text:
        raise ValueError("the answer is empty")
    if fenced := _FENCED.fullmatch(text):
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the answer is not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    return validate_answer(obj)


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field} must be a non-negative integer, got {value!r}")
    return value


def validate_report(obj: Any) -> dict[str, Any]:
    """Check and normalise a whole report; ValueError names the first bad field."""
    report = validate_answer(obj)
    if obj.get("reviewer") not in REVIEWERS:
        raise ValueError(f"reviewer must be one of {', '.join(REVIEWERS)}; got {obj.get('reviewer')!r}")
    if not isinstance(obj.get("model"), str):
        raise ValueError("model must be a string")
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        raise ValueError("usage must be an object")
    report.update(
        reviewer=obj["reviewer"],
        model=obj["model"],
        chunks=_count(obj.get("chunks"), "chunks"),
        usage={k: _count(usage.get(k), f"usage.{k}") for k in ("prompt_tokens", "completion_tokens")},
    )
    return report


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _key(f: dict[str, Any]) -> tuple[Any, ...]:
    loc = f["location"]
    norm = _norm
    return (f["category"], norm(f["message"]), norm(f["quote"]), loc["line_start"], loc["line_end"])


def merge_reports(reports: list[dict[str, Any]], summary: str | None = None) -> dict[str, Any]:
    """One report from several (chunks of one document): duplicates folded, chunks and usage summed.

    A duplicate (same category, message, quote and lines) keeps its first place and the higher severity.
    """
    if not reports:
        raise ValueError("nothing to merge")
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for report in reports:
        for f in report["findings"]:
            kept = merged.setdefault(_key(f), f)
            if SEVERITIES.index(f["severity"]) > SEVERITIES.index(kept["severity"]):
                merged[_key(f)] = {**kept, "severity": f["severity"]}
    if summary is None:
        summary = " ".join(dict.fromkeys(r["summary"].strip() for r in reports if r["summary"].strip()))
    usage = {k: sum(r["usage"][k] for r in reports) for k in ("prompt_tokens", "completion_tokens")}
    return make_report(
        list(merged.values()),
        summary,
        reports[0]["reviewer"],
        reports[0]["model"],
        chunks=sum(r["chunks"] for r in reports),
        usage=usage,
    )
