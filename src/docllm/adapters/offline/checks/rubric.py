"""A rubric's rules as offline checks, and the check list a rubric makes of the built-in ones.

Terms and names are matched in prose only: fenced code, inline code and link targets are left
alone (a command or a URL is spelled as the machine wants it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from docllm.adapters.offline.checks.code_blocks import unparsable_code
from docllm.adapters.offline.checks.document import Doc
from docllm.adapters.offline.checks.links import broken_links
from docllm.adapters.offline.checks.prose import long_sentences, markers
from docllm.domain.review.report import finding
from docllm.domain.review.rubric import (
    BannedTerms,
    BuiltinCheck,
    Check,
    NameSpellings,
    PreferredTerms,
    RequiredSections,
    Rubric,
    SentenceLength,
)

Finding = dict[str, Any]
CheckFn = Callable[[Doc], Iterable[Finding]]
_NOT_WORDS = re.compile(r"\]\([^)]*\)|<?\b[a-z][a-z0-9+.-]*://\S+")  # link targets, bare URLs
_HEADING_NOISE = re.compile(r"\s*\{#[^}]*\}\s*$|[\s:.]+$")


def _words(doc: Doc) -> Iterator[tuple[int, str]]:
    for no, line in doc.prose():
        yield no, _NOT_WORDS.sub(lambda m: " " * len(m.group(0)), line)


def _term(text: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(w) for w in text.split())
    return re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE)


def _title(text: str) -> str:
    return " ".join(_HEADING_NOISE.sub("", text).lower().split())


def required_sections(check: RequiredSections, doc: Doc) -> Iterator[Finding]:
    present = {_title(h.text) for h in doc.outline.headings}
    for section in check.sections:
        if _title(section) not in present:
            yield finding(
                "completeness",
                check.severity,
                f"The required section {section!r} is missing.",
                suggestion=f"Add a section titled {section!r}.",
            )


def _terms(doc: Doc, pairs: list[tuple[str, str]], say: Callable[[str, str], tuple[str, str]], check: Check):
    patterns = [(_term(term), use) for term, use in pairs]
    for no, line in _words(doc):
        for pattern, use in patterns:
            m = pattern.search(line)
            if m:
                message, suggestion = say(m.group(0), use)
                yield doc.finding("style", check.severity, message, no, quote=m.group(0), suggestion=suggestion)


def banned_terms(check: BannedTerms, doc: Doc) -> Iterator[Finding]:
    def say(found: str, _: str) -> tuple[str, str]:
        return f"{found!r} is a banned term.", "Rephrase without it."

    return _terms(doc, [(t, "") for t in check.terms], say, check)


def preferred_terms(check: PreferredTerms, doc: Doc) -> Iterator[Finding]:
    def say(found: str, use: str) -> tuple[str, str]:
        return f"Use {use!r} instead of {found!r}.", f"Write {use!r}."

    return _terms(doc, list(check.replacements), say, check)


def _spelling(name: str) -> re.Pattern[str]:
    """Its letters in order, case ignored, with a space, '-' or '_' allowed between any two."""
    letters = [c for c in name if c.isalnum()]
    return re.compile(r"(?<!\w)" + r"[ \t_-]?".join(re.escape(c) for c in letters) + r"(?!\w)", re.IGNORECASE)


def name_spellings(check: NameSpellings, doc: Doc) -> Iterator[Finding]:
    patterns = [(_spelling(name), name) for name in check.names]
    for no, line in _words(doc):
        for pattern, name in patterns:
            for m in pattern.finditer(line):
                if m.group(0) != name:
                    yield doc.finding(
                        "consistency",
                        check.severity,
                        f"{name} is spelled {m.group(0)!r} here.",
                        no,
                        quote=m.group(0),
                        suggestion=f"Write {name!r}.",
                    )


def _builtin(check: BuiltinCheck, doc: Doc) -> Iterable[Finding]:
    if check.kind == "links":
        return broken_links(doc)
    if check.kind == "markers":
        return markers(doc, in_code=check.in_code)
    return unparsable_code(doc, check.languages or None)


RULES: dict[type, Callable[[Any, Doc], Iterable[Finding]]] = {
    RequiredSections: required_sections,
    BannedTerms: banned_terms,
    PreferredTerms: preferred_terms,
    NameSpellings: name_spellings,
    SentenceLength: lambda check, doc: long_sentences(doc, check.max_words),
    BuiltinCheck: _builtin,
}
# The built-in check a rubric's links or code-blocks check replaces.
REPLACES = {"links": broken_links, "code-blocks": unparsable_code, "markers": markers}


def _tagged(run: Callable[[Doc], Iterable[Finding]], name: str, severity: str | None, doc: Doc) -> Iterator[Finding]:
    for f in run(doc):
        yield {**f, "check": name, **({"severity": severity} if severity else {})}


def rubric_checks(rubric: Rubric, task_name: str, builtins: tuple[CheckFn, ...]) -> list[CheckFn]:
    """The built-in checks the rubric leaves as they are, then its own rules (tagged with ``check``).
    Instructions are the LLM's; a required-sections check whose ``applies_to`` misses the task is skipped."""
    replaced: set[Callable[..., Any]] = set()
    own: list[CheckFn] = []
    for check in rubric.checks:
        if isinstance(check, BuiltinCheck):
            replaced.add(REPLACES[check.kind])
            if not check.enabled:
                continue
        elif isinstance(check, SentenceLength):
            replaced.add(long_sentences)
        rule = RULES.get(type(check))
        if rule is None or (isinstance(check, RequiredSections) and not check.applies(task_name)):
            continue
        # Built-ins keep the severities they always had; a rubric's own rules use the check's.
        severity = None if isinstance(check, BuiltinCheck) else check.severity
        own.append(partial(_tagged, partial(rule, check), rubric.check_name(check), severity))
    return [c for c in builtins if c not in replaced] + own
