"""Rubrics: the checks a team defines for its documents, versioned, named by a task.

Two kinds of check: rules the offline reviewer runs (sections, terms, name spellings, sentence
length, and the built-in link and code checks configured), and instructions the LLM reviewer adds
to its system prompt. Each finding a rubric's check produces carries ``check`` =
``rubric:<rubric>/<check id>``. The files are parsed by an adapter (``adapters/rubrics``); these
classes check what a rubric may say, and raise ValueError for the adapter to place in the file.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from docllm.domain.review.report import SEVERITIES

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")  # rubric names and check ids (fullmatch)
NAME_RULE = "lowercase letters, digits, '-' or '_' (at most 63)"


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise ValueError(why)


def _terms(values: tuple[str, ...], what: str) -> None:
    _need(bool(values), f"{what} must not be empty")
    for value in values:
        _need(bool(value.strip()), f"{what} must not contain an empty term")


@dataclass(frozen=True)
class Check:
    """What every check has: an id unique in its rubric, and the severity of its findings."""

    id: str
    severity: str = "medium"

    def __post_init__(self) -> None:
        _need(bool(NAME_PATTERN.fullmatch(self.id)), f"check id {self.id!r} must be {NAME_RULE}")
        _need(self.severity in SEVERITIES, f"severity must be one of {', '.join(SEVERITIES)}; got {self.severity!r}")


@dataclass(frozen=True)
class RequiredSections(Check):
    """Headings a document must have (any level, case ignored), for task names matching ``applies_to``."""

    severity: str = "high"
    sections: tuple[str, ...] = ()
    applies_to: tuple[str, ...] = ()  # globs on the task name ("*install*"); empty: every document

    def __post_init__(self) -> None:
        super().__post_init__()
        _terms(self.sections, "sections")

    def applies(self, task_name: str) -> bool:
        name = task_name.lower()
        return not self.applies_to or any(fnmatch.fnmatchcase(name, g.lower()) for g in self.applies_to)


@dataclass(frozen=True)
class BannedTerms(Check):
    """Words or phrases the prose must not use (whole words, case ignored)."""

    terms: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _terms(self.terms, "terms")


@dataclass(frozen=True)
class PreferredTerms(Check):
    """``(avoid, use)`` pairs: the first is reported with the second as the suggestion."""

    severity: str = "low"
    replacements: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _terms(tuple(term for pair in self.replacements for term in pair), "replacements")


@dataclass(frozen=True)
class NameSpellings(Check):
    """Names spelled one way only: "AcmeDB" reports "Acme DB", "acmedb" and "Acme-DB"."""

    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _terms(self.names, "names")


@dataclass(frozen=True)
class SentenceLength(Check):
    """Replaces the built-in sentence-length check (40 words) with this maximum."""

    severity: str = "low"
    max_words: int = 40

    def __post_init__(self) -> None:
        super().__post_init__()
        _need(self.max_words >= 1, f"max_words must be at least 1, got {self.max_words}")


@dataclass(frozen=True)
class BuiltinCheck(Check):
    """A built-in offline check, configured: ``links``, ``code-blocks`` (``languages`` to parse) or
    ``markers`` (``in_code``: TODO, FIXME, TBD in code blocks and spans too)."""

    kind: str = "links"
    enabled: bool = True
    languages: tuple[str, ...] = ()  # code-blocks only; empty: every language it knows
    in_code: bool = False  # markers only

    def __post_init__(self) -> None:
        super().__post_init__()
        _need(self.kind in BUILTIN_KINDS, f"kind must be one of {', '.join(BUILTIN_KINDS)}; got {self.kind!r}")
        _need(not self.languages or self.kind == "code-blocks", "languages applies to code-blocks only")
        _need(not self.in_code or self.kind == "markers", "in_code applies to markers only")
        for language in self.languages:
            _need(language in CODE_LANGUAGES, f"languages are {', '.join(CODE_LANGUAGES)}; got {language!r}")


@dataclass(frozen=True)
class Instruction(Check):
    """Words the LLM reviewer adds to its system prompt; the offline reviewer cannot follow them."""

    text: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        _need(bool(self.text.strip()), "text must not be empty")


BUILTIN_KINDS = ("links", "code-blocks", "markers")
CODE_LANGUAGES = ("json", "yaml", "python")  # those the built-in code check parses


@dataclass(frozen=True)
class Rubric:
    name: str
    version: str
    checks: tuple[Check, ...]
    description: str = ""

    def __post_init__(self) -> None:
        _need(
            bool(NAME_PATTERN.fullmatch(self.name)),
            f"rubric name {self.name!r} must be lowercase letters, digits, '-' or '_'",
        )
        _need(bool(self.version.strip()), "version must not be empty")
        _need(bool(self.checks), "a rubric needs at least one check")
        seen: set[str] = set()
        for check in self.checks:
            _need(check.id not in seen, f"check id {check.id!r} is used twice")
            seen.add(check.id)

    @property
    def ref(self) -> str:
        """What a report records: ``install-guide@3``."""
        return f"{self.name}@{self.version}"

    def check_name(self, check: Check) -> str:
        """A finding's ``check`` field."""
        return f"rubric:{self.name}/{check.id}"

    @property
    def instructions(self) -> tuple[Instruction, ...]:
        return tuple(c for c in self.checks if isinstance(c, Instruction))
