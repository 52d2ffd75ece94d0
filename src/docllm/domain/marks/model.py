"""A finding's fingerprint and the mark a person puts on it (docs/FINDINGS.md).

The fingerprint is what a finding *is*, not where it is: its rule (the rubric check, else the
category), the quote's normalised text (``quoted``) and the heading path. Lines are left out, so a mark still
applies when text is added or removed around the finding; a changed quote is a new finding. A
finding without a quote is known by its message, its line references left out ("repeats the one on
line 37" stays the same finding when that line moves; "step 3" and "step 4" stay two).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from docllm.domain.errors import DocllmError

REASONS = ("false-alarm", "accepted", "wont-fix")
MAX_NOTE = 1000  # characters: a sentence or two, not a document
MAX_NAME = 255  # the task name's column


class MarkError(DocllmError):
    """A mark that cannot be made: a bad reason, an unknown task, a finding number out of range.
    Nothing is written."""


def _words(text: str) -> str:
    """Unicode-normalised (NFKC: full-width, ligatures), runs of whitespace as one space, trimmed:
    a paragraph re-wrapped or re-indented quotes the same text."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


# What a model varies from one answer to the next when it quotes the same text: typographic quotes
# and dashes, code marks and emphasis around words, a Markdown marker before the line, punctuation
# at either end. Operators and signs are text: `x ** 2`, `C++` and `--force` are kept as they are.
_PLAIN = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "`": None}
)
_EMPHASIS = re.compile(r"(\*{1,3}|(?<!\w)_{1,3})(?=\S)(.+?)(?<=\S)\1(?!\w)")  # snake_case is no emphasis
_MARKER = re.compile(r"^(?:#{1,6}|>|[-*+]|\d{1,3}[.)])\s+")
_ENDS = " .,;:!?'\"()[]\u2026"
_LINE_REFERENCE = re.compile(r"\b(lines?|l\.)\s*\d+(?:\s*(?:-|to|and)\s*\d+)?", re.IGNORECASE)


def quoted(text: str) -> str:
    """A quote as the fingerprint reads it: "`tool --help`." and "tool --help" are one quote; case,
    words, signs and the punctuation inside are kept (``#Limits`` is not ``#limits``)."""
    plain = _EMPHASIS.sub(r"\2", _words(text).translate(_PLAIN))
    while (bare := _MARKER.sub("", plain)) != plain:
        plain = bare
    return " ".join(plain.strip(_ENDS).split())


def heading_path(heading: str) -> str:
    """``Install >  linux`` as ``install > linux``: parts compared as words, case ignored."""
    return " > ".join(_words(part).casefold() for part in heading.split(">") if part.strip())


def location_of(finding: dict[str, Any]) -> dict[str, Any]:
    loc = finding.get("location")
    return loc if isinstance(loc, dict) else {}


def rule_of(finding: dict[str, Any]) -> str:
    """What SARIF calls the finding's rule: its rubric check, else its category."""
    return str(finding.get("check") or finding.get("category") or "other")


def parts(finding: dict[str, Any]) -> tuple[str, str, str]:
    """(rule, quote, heading path), normalised: what the fingerprint hashes."""
    loc = location_of(finding)
    quote = quoted(str(finding.get("quote") or ""))
    if not quote:  # no quote: the message is what tells two findings of a section apart
        quote = "message: " + _LINE_REFERENCE.sub(r"\1 #", _words(str(finding.get("message") or "")))
    return rule_of(finding), quote, heading_path(str(loc.get("heading") or ""))


def fingerprint(finding: dict[str, Any]) -> str:
    """64 hex characters; the same for the same rule, quote and heading, wherever the lines are."""
    return hashlib.sha256(json.dumps(parts(finding), ensure_ascii=False).encode()).hexdigest()


def quote_print(finding: dict[str, Any]) -> str:
    """The fingerprint without the heading: how a mark finds its finding again when the section
    was renamed or moved (a new title renames every path), if it is the only one of its kind."""
    rule, quote, _ = parts(finding)
    return hashlib.sha256(json.dumps([rule, quote], ensure_ascii=False).encode()).hexdigest()


def match(findings: Sequence[Any], marks: Sequence[Mark]) -> dict[int, Mark]:
    """Which findings (by 0-based index) a mark applies to: the same fingerprint, else, for a mark
    left without one, the same rule and quote under another heading when exactly one such finding
    is left and one such mark (two alike: the heading is what told them apart, so neither is taken)."""
    by_print = {m.fingerprint: m for m in marks}
    if not by_print:
        return {}
    found: dict[int, Mark] = {}
    for i, f in enumerate(findings):
        mark = by_print.get(fingerprint(f)) if isinstance(f, dict) else None
        if mark is not None:
            found[i] = mark
    used = {m.fingerprint for m in found.values()}
    left_marks: dict[str, list[Mark]] = {}
    for m in marks:
        if m.fingerprint not in used and m.quote_print:
            left_marks.setdefault(m.quote_print, []).append(m)
    left: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        if i not in found and isinstance(f, dict):
            left.setdefault(quote_print(f), []).append(i)
    for key, ms in left_marks.items():
        if len(ms) == 1 and len(left.get(key, [])) == 1:
            found[left[key][0]] = ms[0]
    return found


@dataclass(frozen=True)
class Mark:
    """A person's judgement of one finding of one document. ``task_id``/``number``: where it was
    made (the task and the finding's 1-based place in its report); ``marked_at``: the store's time."""

    document: str
    fingerprint: str
    reason: str
    note: str = ""
    tenant: str = ""  # the tenant of the task it was made on ("": none); it applies to that tenant's reports only
    quote_print: str = ""  # quote_print() of the finding: found again under a renamed heading; "": not kept
    rule: str = ""
    category: str = ""
    severity: str = ""
    quote: str = ""
    heading: str = ""
    message: str = ""
    task_id: int | None = None
    number: int | None = None
    marked_by: str = ""
    marked_at: datetime | None = None

    def shown(self) -> dict[str, Any]:
        """What a report, SARIF or JSON says of a dismissed finding."""
        at = self.marked_at.isoformat() if self.marked_at else None
        return {"reason": self.reason, "note": self.note, "by": self.marked_by, "at": at, "task_id": self.task_id}


def check_reason(reason: str) -> str:
    if reason not in REASONS:
        raise MarkError(f"reason must be one of {', '.join(REASONS)}; got {reason!r}")
    return reason


def check_note(note: str) -> str:
    # One line of printable text: it is shown in tables, annotations, SARIF and JUnit.
    note = " ".join("".join(c for c in note if c.isprintable() or c.isspace()).split())
    if len(note) > MAX_NOTE:
        raise MarkError(f"a note is at most {MAX_NOTE} characters; got {len(note)}")
    return note


def mark_for(
    document: str, finding: dict[str, Any], reason: str, note: str, task_id: int, number: int, by: str, tenant: str = ""
) -> Mark:
    """The mark of ``finding`` (the ``number``-th of task ``task_id``'s report), checked."""
    rule, _, _ = parts(finding)
    loc = location_of(finding)
    return Mark(
        document=document,
        fingerprint=fingerprint(finding),
        quote_print=quote_print(finding),
        reason=check_reason(reason),
        note=check_note(note),
        tenant=tenant,
        rule=rule[:255],
        category=str(finding.get("category") or "")[:32],
        severity=str(finding.get("severity") or "")[:16],
        quote=str(finding.get("quote") or "")[:500],
        heading=str(loc.get("heading") or "")[:500],
        message=str(finding.get("message") or "")[:1000],
        task_id=task_id,
        number=number,
        marked_by=by[:255],
    )


def dismissed(finding: dict[str, Any], mark: Mark) -> dict[str, Any]:
    """The finding as a report shows it once judged: the same, with the judgement beside it."""
    return {**finding, "dismissed": mark.shown()}
