"""The review report stored in a task's ``result``: validation, building and merging.

A report is a reviewer's answer (``answer_schema.py``: findings and a summary) and what made it:
reviewer, model, chunks, usage, and the versions of the prompt, the answer schema and the rubric
(None where there was none; reports stored before these keys existed lack them).

A finding's ``location`` is ``{"heading": "Install > Linux", "line_start": 12, "line_end": 14}``:
the heading path (" > "-joined, "" before the first heading) and whole-document lines (1-based),
either line None where unknown. Its optional ``check`` names the rubric check that produced it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from docllm.domain.errors import PermanentError
from docllm.domain.review.answer_schema import ANSWER_SCHEMA, FINDING_SCHEMA, SCHEMA_VERSION
from docllm.domain.review.answer_schema import CATEGORIES as CATEGORIES  # re-exported: readers of reports use them
from docllm.domain.review.answer_schema import SEVERITIES as SEVERITIES
from docllm.domain.review.json_schema import check

REVIEWERS = ("openai", "offline")
_FINDING_FIELDS = frozenset(FINDING_SCHEMA["properties"])
_OPTIONAL_TEXT = ("quote", "suggestion")  # a model may leave these out; the message it may not
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
    *,
    prompt_version: int | None = None,
    rubric_version: int | str | None = None,
    deployments: list[str] | None = None,
) -> dict[str, Any]:
    """A report checked whole; ``prompt_version`` None for a reviewer without a prompt (offline);
    ``deployments``: which LLM deployment served each chunk, in chunk order (None: not recorded)."""
    return validate_report(
        assembled(findings, summary, reviewer, model, chunks, usage, prompt_version, rubric_version, deployments)
    )


def assembled(
    findings: list[dict[str, Any]],
    summary: str,
    reviewer: str,
    model: str,
    chunks: int,
    usage: dict[str, int] | None,
    prompt_version: int | None,
    rubric_version: int | str | None,
    deployments: list[str] | None,
) -> dict[str, Any]:
    """A report's fields, in the order ``validate_report`` writes them, not checked: for parts that
    are (``make_report`` checks what it assembles; ``merge_reports`` and ``chat.chunk_report`` fold
    checked parts)."""
    usage = usage or {}
    report = {
        "findings": findings,
        "summary": summary,
        "reviewer": reviewer,
        "model": model,
        "chunks": chunks,
        "usage": {
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
        },
        "prompt_version": prompt_version,
        "schema_version": SCHEMA_VERSION,
        "rubric_version": rubric_version,
    }
    if deployments is not None:
        report["deployments"] = deployments
    return report


def _line(value: Any) -> Any:
    """A line number a model wrote as text ("12") as the integer; anything else as it is, for the schema to judge."""
    return int(value) if isinstance(value, str) and value.strip().isdigit() else value


def _location(value: Any) -> Any:
    if value is None or isinstance(value, str):  # a model may answer a bare section name
        return location(value or "")
    if not isinstance(value, dict):
        return value
    return {  # only the schema's fields: a model's extra ones are left out, as in a finding
        "heading": value.get("heading") or "",
        "line_start": _line(value.get("line_start")),
        "line_end": _line(value.get("line_end")),
    }


def _lenient(value: Any) -> Any:
    """A finding as the looser rungs (``json_object``, words) let a model write it, in the schema's
    spelling: categories and severities in any case, null or missing text, a bare or partial
    location, no ``check``. A field the schema does not name (a model's own "confidence") is left
    out rather than refused: refusing would cost a repair request, and charge the document, for
    words nobody reads. Nothing is invented beyond empty text, unknown lines and a null check."""
    if not isinstance(value, dict):
        return value
    out = {k: v for k, v in value.items() if k in _FINDING_FIELDS}
    out.setdefault("check", None)
    for field in ("category", "severity"):
        if isinstance(out.get(field), str):
            out[field] = out[field].strip().lower()
    for field in _OPTIONAL_TEXT:
        out.setdefault(field, "")
    for field in (*_OPTIONAL_TEXT, "message"):
        if field in out and out[field] is None:
            out[field] = ""
    out["location"] = _location(value.get("location"))
    return out


def validate_answer(obj: Any) -> dict[str, Any]:
    """Check and normalise the part a reviewer writes, ``{"findings": [...], "summary": "..."}``,
    against the answer schema (``answer_schema.py``): ValueError names the first bad field."""
    if isinstance(obj, dict):  # its own extra fields are left out (see _lenient)
        obj = {k: v for k, v in obj.items() if k in ANSWER_SCHEMA["properties"]}
        obj["summary"] = "" if obj.get("summary") is None else obj["summary"]
        if isinstance(obj.get("findings"), list):
            obj["findings"] = [_lenient(f) for f in obj["findings"]]
    check(ANSWER_SCHEMA, obj)
    findings = []
    for i, f in enumerate(obj["findings"]):
        if not f["message"].strip():  # beyond the schema: strict mode has no portable minLength
            raise ValueError(f"findings[{i}].message must not be empty")
        f = {**f, "location": location(**f["location"])}  # line_end not before line_start
        if f["check"] is None:
            del f["check"]  # a finding no check named reads as it did before rubrics
        findings.append(f)
    return {"findings": findings, "summary": obj["summary"]}


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
    if not isinstance(obj, dict):
        raise ValueError(f"the report must be an object, got {type(obj).__name__}")
    report = validate_answer({"findings": obj.get("findings"), "summary": obj.get("summary")})
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
        prompt_version=_version(obj.get("prompt_version"), "prompt_version", int, type(None)),
        schema_version=_version(obj.get("schema_version"), "schema_version", int),
        rubric_version=_version(obj.get("rubric_version"), "rubric_version", int, str, type(None)),
    )
    if "deployments" in obj:  # only reports of routed reviews have it
        names = obj["deployments"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("deployments must be a list of deployment names")
        report["deployments"] = names
    return report


def _version(value: Any, field: str, *kinds: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, kinds):
        wanted = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise ValueError(f"{field} must be {wanted}, got {value!r}")
    return value


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _key(f: dict[str, Any]) -> tuple[Any, ...]:
    loc = f["location"]
    norm = _norm
    return (f["category"], norm(f["message"]), norm(f["quote"]), loc["line_start"], loc["line_end"])


def merge_reports(reports: list[dict[str, Any]], summary: str | None = None) -> dict[str, Any]:
    """One report from several (chunks of one document): duplicates folded, chunks and usage summed.

    A duplicate (same category, message, quote and lines) keeps its first place and the higher severity.
    The reports are ``make_report``'s, each checked whole: the merge folds their checked fields and
    is not checked again (a third pass over every finding, 7 % of a worker's loop at C = 1,024).
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
    served = [r.get("deployments") for r in reports]
    return assembled(
        list(merged.values()),
        summary,
        reports[0]["reviewer"],
        reports[0]["model"],
        sum(r["chunks"] for r in reports),
        usage,
        reports[0]["prompt_version"],  # one reviewer's chunks: one prompt, one rubric
        reports[0]["rubric_version"],
        None if None in served else [n for names in served for n in names or ()],
    )
