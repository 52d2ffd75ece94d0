"""An earlier SARIF run as ``docllm check --baseline`` reads it: how many times each (file,
finding fingerprint) was reported. docllm writes its fingerprint in each result's
``partialFingerprints`` (``docllm/v1``); a result without it (an older docllm's) is fingerprinted
from its rule, snippet and section, as the finding was."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any
from urllib.parse import unquote_to_bytes

from docllm.domain.errors import DocllmError
from docllm.domain.marks.model import fingerprint

FINGERPRINT_KEY = "docllm/v1"
MAX_BASELINE_BYTES = 64 * 1024 * 1024


class BaselineError(DocllmError):
    """A --baseline file that is not a SARIF log: the run stops, naming it."""


def where(path: str) -> str:
    """A file as baselines compare them: absolute and normalised, from the working directory."""
    return os.path.normpath(os.path.abspath(path))


def _path(location: Any) -> str | None:
    uri = ((location or {}).get("physicalLocation") or {}).get("artifactLocation", {}).get("uri")
    if not isinstance(uri, str) or not uri:
        return None
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    return where(os.fsdecode(unquote_to_bytes(uri)))


def _fingerprint(result: dict[str, Any]) -> str:
    given = (result.get("partialFingerprints") or {}).get(FINGERPRINT_KEY)
    if isinstance(given, str) and given:
        return given
    location = (result.get("locations") or [{}])[0] or {}
    snippet = ((location.get("physicalLocation") or {}).get("region") or {}).get("snippet") or {}
    section = (location.get("logicalLocations") or [{}])[0].get("name") or ""
    rule = str(result.get("ruleId") or "").removeprefix("docllm/")
    text = (result.get("message") or {}).get("text") or ""
    return fingerprint(
        {"check": rule, "quote": snippet.get("text") or "", "message": text, "location": {"heading": section}}
    )


def read_baseline(path: str) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """(file, fingerprint) counted in the earlier run: its open results, and all of them (the
    suppressed too: what a dismissed finding is compared with)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BASELINE_BYTES + 1)
    except OSError as exc:
        raise BaselineError(f"--baseline {path}: cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BASELINE_BYTES:
        raise BaselineError(f"--baseline {path}: over {MAX_BASELINE_BYTES // 2**20} MiB")
    try:
        log = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"--baseline {path}: not JSON: {exc}") from None
    runs = log.get("runs") if isinstance(log, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise BaselineError(f"--baseline {path}: not a SARIF log (no list of runs); write one with --format sarif")
    seen: Counter[tuple[str, str]] = Counter()
    every: Counter[tuple[str, str]] = Counter()
    for r, run in enumerate(runs):
        results = run.get("results") or []
        if not isinstance(results, list):
            raise BaselineError(f"--baseline {path}: not a SARIF log: the results of run {r} are not a list")
        for i, result in enumerate(results):
            try:
                file = _path((result.get("locations") or [None])[0])
                if file is None:
                    continue
                key = (file, _fingerprint(result))
                every[key] += 1
                if not result.get("suppressions"):  # a dismissed finding is the marks' business
                    seen[key] += 1
            except (AttributeError, TypeError, KeyError, IndexError, ValueError):  # another shape than SARIF's
                raise BaselineError(
                    f"--baseline {path}: not a SARIF log: run {r}, result {i} has another shape"
                ) from None
    return seen, every
