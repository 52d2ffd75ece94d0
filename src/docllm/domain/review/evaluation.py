"""Scoring a reviewer against expected findings (``docllm eval``; docs/EVAL.md).

The matching rule: a produced finding matches an expected one when
  1. it has the expected ``check`` and/or ``category`` (whichever the expectation names),
  2. its location overlaps the expected one: its lines overlap the expected range, or its heading
     path is the expected section or inside it (a PDF's page N is the section ``page N``); an
     expectation without a location matches anywhere in the document,
  3. its severity is at least the expected minimum.
Pairs are one-to-one, and the largest such pairing is kept: an expected finding is matched by at
most one produced finding, so a duplicate, like any finding no expectation names, counts against
precision. Precision = matched / produced, recall = matched / expected; None when it divides by 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from docllm.domain.marks.model import quoted
from docllm.domain.review.report import CATEGORIES, SEVERITIES


def _path(heading: str) -> tuple[str, ...]:
    """A heading path compared as words, case ignored: "Install >  linux" is "install > linux"."""
    return tuple(" ".join(part.lower().split()) for part in heading.split(">") if part.strip())


@dataclass(frozen=True)
class Expected:
    """One finding a golden document should get. ``line``: where it is written in its file."""

    check: str | None = None
    category: str | None = None
    severity: str = "low"  # the minimum; low accepts any
    lines: tuple[int, int] | None = None
    section: str | None = None  # a heading path; a PDF's page N is "page N"
    line: int = 0
    quote: str | None = None  # the text it quotes, compared as marks compare quotes (docs/FINDINGS.md)

    def __post_init__(self) -> None:
        if self.check is None and self.category is None:
            raise ValueError("an expected finding needs a check or a category")
        if self.category is not None and self.category not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}; got {self.category!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}; got {self.severity!r}")
        if self.lines is not None and not 1 <= self.lines[0] <= self.lines[1]:
            raise ValueError(f"lines must be N or N-M with 1 <= N <= M; got {self.lines[0]}-{self.lines[1]}")
        if self.lines is not None and self.section is not None:
            raise ValueError("an expected finding is placed by lines or by a section (or page), not both")

    def matches(self, finding: dict[str, Any]) -> bool:
        if self.check is not None and finding.get("check") != self.check:
            return False
        if self.category is not None and finding["category"] != self.category:
            return False
        if SEVERITIES.index(finding["severity"]) < SEVERITIES.index(self.severity):
            return False
        if self.quote is not None and quoted(str(finding.get("quote") or "")) != quoted(self.quote):
            return False
        return self._overlaps(finding["location"])

    def _overlaps(self, loc: dict[str, Any]) -> bool:
        if self.lines is not None:
            start, end = loc["line_start"], loc["line_end"]
            return start is not None and start <= self.lines[1] and (end or start) >= self.lines[0]
        if self.section is not None:
            want = _path(self.section)
            return _path(loc["heading"])[: len(want)] == want
        return True


def pair(expected: Sequence[Expected], produced: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    """The largest one-to-one pairing (expected index, produced index), by augmenting paths: a
    greedy first match could take the only finding a later expectation had."""
    candidates = [[j for j, f in enumerate(produced) if e.matches(f)] for e in expected]
    owner: dict[int, int] = {}  # produced index -> the expected one it is paired with

    def augment(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    return sorted((i, j) for j, i in owner.items())


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class Score:
    expected: int = 0
    produced: int = 0
    matched: int = 0
    cost_usd: float | None = 0.0  # None: the reviewer called a model the price table does not price

    @property
    def precision(self) -> float | None:
        return _ratio(self.matched, self.produced)

    @property
    def recall(self) -> float | None:
        return _ratio(self.matched, self.expected)

    def __add__(self, other: Score) -> Score:
        """Micro-averaging: the totals' ratios are of the summed counts. A cost is unknown once any is."""
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Score(self.expected + other.expected, self.produced + other.produced, self.matched + other.matched, cost)


@dataclass(frozen=True)
class Comparison:
    """One document's findings against its expectations: the score, and what did not pair."""

    score: Score
    missed: tuple[Expected, ...]
    unexpected: tuple[dict[str, Any], ...]
    # Of the unexpected, those a person had dismissed as false alarms (``false_alarms:``): back again.
    false_alarms: tuple[dict[str, Any], ...] = ()


def compare(
    expected: Sequence[Expected],
    produced: Sequence[dict[str, Any]],
    cost_usd: float | None = 0.0,
    false_alarms: Sequence[Expected] = (),
) -> Comparison:
    # A finding that is a known false alarm by its very quote pairs with no expectation: back again,
    # it must not pass for the real finding of the same kind and lines that a new prompt lost.
    known = {j for j, f in enumerate(produced) if any(a.quote is not None and a.matches(f) for a in false_alarms)}
    candidates = [j for j in range(len(produced)) if j not in known]
    pairs = [(i, candidates[j]) for i, j in pair(expected, [produced[j] for j in candidates])]
    paired_e, paired_p = {i for i, _ in pairs}, {j for _, j in pairs}
    unexpected = tuple(f for j, f in enumerate(produced) if j not in paired_p)
    return Comparison(
        Score(len(expected), len(produced), len(pairs), cost_usd),
        tuple(e for i, e in enumerate(expected) if i not in paired_e),
        unexpected,
        tuple(f for f in unexpected if any(a.matches(f) for a in false_alarms)),
    )
