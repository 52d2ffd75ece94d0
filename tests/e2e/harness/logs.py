"""Reading the processes' JSON log lines back: the product's events, as an operator's tools would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_log_lines(logs: Path) -> list[dict[str, Any]]:
    """Every JSON log line of every ``*.log`` in ``logs``, each with ``_proc`` (the process name)."""
    lines: list[dict[str, Any]] = []
    for path in sorted(logs.glob("*.log")):
        for record in json_lines(path):
            record["_proc"] = path.stem
            lines.append(record)
    return lines


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON log lines of one file; other lines (tracebacks, text) are passed over."""
    records = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by SIGKILL
    return records


def events(lines: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """The lines that are domain events (all, or those named)."""
    return [r for r in lines if "event" in r and (not names or r["event"] in names)]
