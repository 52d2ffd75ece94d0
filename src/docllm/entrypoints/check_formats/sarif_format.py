"""SARIF 2.1.0, what code scanning reads: a rule per check (its description), a result per finding
with its line region, uris relative to the working directory (``%SRCROOT%``), severities as levels."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import docllm
from docllm.adapters.files.sarif_baseline import FINGERPRINT_KEY
from docllm.domain.marks.model import fingerprint
from docllm.domain.review.checking import Checked
from docllm.entrypoints.check_formats.rules import SARIF_LEVEL, lines, rule_help, rule_id

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _artifact(path: str) -> dict[str, Any]:
    """``path``: the file system's spelling (its bytes percent-encoded, whatever their encoding); one
    outside the working directory gets an absolute ``file:`` uri (``../x.md`` from %SRCROOT% is nowhere)."""
    if os.path.isabs(path) or path.startswith("../") or path == "..":
        return {"uri": "file://" + quote(os.fsencode(os.path.abspath(path)))}
    return {"uri": quote(os.fsencode(path)), "uriBaseId": "%SRCROOT%"}


def _result(path: str, f: dict[str, Any], index: int, compared: bool) -> dict[str, Any]:  # path: the source's key
    start, end = lines(f)
    physical: dict[str, Any] = {"artifactLocation": _artifact(path)}
    if start:
        region: dict[str, Any] = {"startLine": start, "endLine": max(end or start, start)}
        if f.get("quote"):
            region["snippet"] = {"text": f["quote"]}
        physical["region"] = region
    text = f["message"] + (f" {f['suggestion']}" if f.get("suggestion") else "")
    result: dict[str, Any] = {
        "ruleId": rule_id(f),
        "ruleIndex": index,
        "level": SARIF_LEVEL[f["severity"]],
        "message": {"text": text},
        "locations": [{"physicalLocation": physical}],
        "properties": {"severity": f["severity"], "category": f["category"]},
    }
    heading = (f.get("location") or {}).get("heading")
    if heading:
        result["locations"][0]["logicalLocations"] = [{"name": heading, "kind": "section"}]
    result["partialFingerprints"] = {FINGERPRINT_KEY: fingerprint(f)}  # what --baseline matches on
    judged = f.get("dismissed")
    if judged:  # a person dismissed it (docllm findings): suppressed, and known before this run
        why = judged["reason"] + (f": {judged['note']}" if judged.get("note") else "")
        result["suppressions"] = [{"kind": "external", "status": "accepted", "justification": why}]
        if compared:  # against the earlier run (suppressed results too): judged is not the same as seen
            result["baselineState"] = f.get("baseline_state", "new")
    elif compared:  # --baseline: only the new ones are reported
        result["baselineState"] = "new"
    return result


def render(results: Sequence[Checked], threshold: str) -> str:
    ids = sorted({rule_id(f) for r in results for f in [*r.findings, *r.dismissed]})
    index = {rid: i for i, rid in enumerate(ids)}
    rules = [
        {
            "id": rid,
            "name": rid.removeprefix("docllm/"),
            "shortDescription": {"text": rule_help(rid)},
            "fullDescription": {"text": rule_help(rid)},
        }
        for rid in ids
    ]
    reviewers = sorted({str(r.extra.get("model") or r.extra.get("reviewer")) for r in results if r.extra})
    run = {
        "tool": {
            "driver": {
                "name": "docllm",
                "version": docllm.__version__,
                "rules": rules,
                "properties": {"reviewers": reviewers, "failOn": threshold},
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(os.getcwd()).as_uri() + "/"}},
        "artifacts": [{"location": _artifact(r.source.key)} for r in results],
        "results": [
            _result(r.source.key, f, index[rule_id(f)], r.known is not None)
            for r in results
            for f in [*r.findings, *r.dismissed]
        ],
    }
    return json.dumps({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, ensure_ascii=False, indent=2) + "\n"
