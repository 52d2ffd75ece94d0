"""The eval's matching rule (domain/review/evaluation.py): what pairs a produced finding with an expected
one, one to one, and how the pairs make precision and recall."""

from __future__ import annotations

import pytest

from docllm.domain.review.evaluation import Expected, Score, compare, pair
from docllm.domain.review.report import finding


def produced(category="completeness", severity="medium", heading="", start=None, end=None, check=None):
    f = finding(category, severity, "a problem", heading=heading, line_start=start, line_end=end)
    return f if check is None else {**f, "check": check}


def test_a_finding_of_the_category_on_the_lines_at_the_severity_matches():
    e = Expected(category="completeness", severity="medium", lines=(10, 12))
    assert e.matches(produced(start=12, end=14))  # overlaps the range's last line
    assert e.matches(produced(start=8, end=10))  # and its first
    assert e.matches(produced(severity="critical", start=11))  # a higher severity is "at least"


def test_a_finding_elsewhere_does_not_match():
    e = Expected(category="completeness", lines=(10, 12))
    assert not e.matches(produced(start=13))
    assert not e.matches(produced(start=5, end=9))
    assert not e.matches(produced())  # no lines: nowhere in particular, not on these lines


def test_a_lower_severity_does_not_match():
    assert not Expected(category="completeness", severity="high").matches(produced(severity="medium"))


def test_the_category_and_the_check_must_be_the_expected_ones():
    check = "rubric:install-guide/banned-terms"
    assert not Expected(category="style").matches(produced(category="clarity"))
    assert Expected(check=check).matches(produced(category="style", check=check))
    assert not Expected(check=check).matches(produced(category="style"))  # a built-in check's finding
    assert not Expected(check=check, category="clarity").matches(produced(category="style", check=check))


def test_a_section_matches_itself_and_what_is_inside_it():
    e = Expected(category="completeness", section="Install > Linux")
    assert e.matches(produced(heading="install >  Linux"))  # case and spacing ignored
    assert e.matches(produced(heading="Install > Linux > Debian"))
    assert not e.matches(produced(heading="Install"))
    assert not e.matches(produced(heading="Install > Linux mint"))
    assert Expected(category="completeness").matches(produced(heading="Anywhere"))  # no location: the document


def test_one_expected_finding_is_matched_once_and_a_duplicate_lowers_precision():
    e = [Expected(category="completeness", lines=(3, 3))]
    result = compare(e, [produced(start=3), produced(start=3)])
    assert result.score == Score(expected=1, produced=2, matched=1)
    assert (result.score.precision, result.score.recall) == (0.5, 1.0)
    assert len(result.unexpected) == 1 and result.missed == ()


def test_unexpected_findings_lower_precision_and_misses_lower_recall():
    e = [Expected(category="links", lines=(1, 1)), Expected(category="code", lines=(9, 9))]
    result = compare(e, [produced("links", start=1), produced("clarity", start=4), produced("style", start=6)])
    assert (result.score.matched, result.score.precision, result.score.recall) == (1, 1 / 3, 1 / 2)
    assert [f["category"] for f in result.unexpected] == ["clarity", "style"]
    assert result.missed == (e[1],)


def test_the_largest_pairing_is_kept_when_a_greedy_one_would_strand_an_expectation():
    # The first finding fits both expectations, the second only the first: in order, a greedy
    # match would give the first finding to the first expectation and leave the second unmatched.
    e = [Expected(category="completeness", lines=(1, 10)), Expected(category="completeness", lines=(5, 5))]
    assert pair(e, [produced(start=5), produced(start=2)]) == [(0, 1), (1, 0)]


def test_nothing_to_divide_by_is_no_figure_and_totals_are_micro_averaged():
    assert Score().precision is None and Score().recall is None
    total = Score(4, 2, 2, 0.5) + Score(1, 8, 1, 0.25)
    assert (total.precision, total.recall, total.cost_usd) == (0.3, 0.6, 0.75)
    assert (Score(1, 1, 1, None) + Score(1, 1, 1, 0.5)).cost_usd is None  # one unpriced: unknown


@pytest.mark.parametrize(
    "kwargs, why",
    [
        ({}, "needs a check or a category"),
        ({"category": "typo"}, "category must be one of"),
        ({"category": "style", "severity": "urgent"}, "severity must be one of"),
        ({"category": "style", "lines": (5, 2)}, "1 <= N <= M"),
        ({"category": "style", "lines": (1, 2), "section": "A"}, "not both"),
    ],
)
def test_an_impossible_expectation_is_refused(kwargs, why):
    with pytest.raises(ValueError, match=why):
        Expected(**kwargs)
