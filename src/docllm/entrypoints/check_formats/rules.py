"""What the formats share: a finding's rule (its rubric check, else its category), the rules'
descriptions, where it is, and its severity in each format's words."""

from __future__ import annotations

from typing import Any

Finding = dict[str, Any]

CATEGORY_HELP = {
    "correctness": "A statement, command or value that is wrong.",
    "consistency": "The document contradicts itself: names, values or headings that disagree.",
    "completeness": "Something is missing or unfinished: an empty section, a TODO, a required section.",
    "clarity": "Text that is hard to follow: long sentences, ambiguous wording.",
    "formatting": "Markup that renders wrong: heading levels that jump, fences never closed.",
    "links": "Links that cannot work: anchors that match no heading, undefined references.",
    "code": "Code blocks that do not parse, or are too deeply nested to check.",
    "style": "The team's style: banned or preferred terms.",
    "security": "Advice that weakens security.",
    "other": "Anything else the reviewer found.",
}


def rule_id(f: Finding) -> str:
    check = f.get("check")
    return f"docllm/{check}" if check else f"docllm/{f['category']}"


def rule_help(rid: str) -> str:
    name = rid.removeprefix("docllm/")
    return CATEGORY_HELP.get(name, f"The rubric check {name!r}.")


def lines(f: Finding) -> tuple[int | None, int | None]:
    loc = f.get("location") or {}
    return loc.get("line_start"), loc.get("line_end")


def title(f: Finding) -> str:
    heading = (f.get("location") or {}).get("heading") or ""
    return f"{f['severity']} {f['category']}" + (f" ({heading})" if heading else "")


# critical and high fail a build; medium warns; low is a note.
SARIF_LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "note"}
GITHUB_LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "notice"}
RDJSON_SEVERITY = {"critical": "ERROR", "high": "ERROR", "medium": "WARNING", "low": "INFO"}
