"""Documents to submit, and whether a stored report is about its own document."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_documents(directory: Path, count: int, tag: str = "doc", start: int = 1) -> dict[str, str]:
    """``count`` small Markdown files; returns file name -> its first heading line (what the LLM
    test server quotes, so a stored report can be matched to its document)."""
    directory.mkdir(parents=True, exist_ok=True)
    headings = {}
    for i in range(start, start + count):
        name = f"{tag}-{i:05d}.md"
        heading = f"# {tag.capitalize()} {i}: checking report {i * 7919 % 100003}"
        body = (
            f"{heading}\n\nThis document number {i} explains one thing.\n\n## Details\n\n"
            f"Step {i} is described here. It has a [link](https://example.com/{i}).\n"
        )
        (directory / name).write_text(body, encoding="utf-8")
        headings[name] = heading
    return headings


def report_matches(result: Any, heading: str) -> bool:
    """The stored report is about this document: a finding quotes its first heading."""
    if not isinstance(result, dict):
        return False
    return any(f.get("quote") == heading for f in result.get("findings") or [])
