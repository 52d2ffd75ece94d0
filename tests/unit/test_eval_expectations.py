"""Expectations files and golden set directories (adapters/evaluation): what they say, and the
one-line errors, naming the file and the line, for what is wrong in them."""

from __future__ import annotations

from pathlib import Path

import pytest

from docllm.adapters.evaluation.expectations import parse_expectations
from docllm.adapters.evaluation.golden_set import load_cases
from docllm.domain.errors import EvaluationError
from docllm.domain.review.evaluation import Expected
from docllm.domain.review.rubric import BannedTerms, Rubric
from tests.support.memory.rubrics import InMemoryRubricCatalog

RUBRICS = Path(__file__).resolve().parents[2] / "examples" / "rubrics"
GOOD = """\
rubric: install-guide
findings:
  - check: rubric:install-guide/sections
    severity: HIGH
  - category: style
    lines: 12-14
  - category: completeness
    page: 2
  - category: Completeness
    section: Install > Linux
"""


def test_an_expectations_file_says_what_each_finding_is_and_where():
    parsed = parse_expectations(GOOD, "guide.expected.yaml")
    assert parsed.rubric == "install-guide" and parsed.rubric_line == 1
    assert parsed.findings == (
        Expected(check="rubric:install-guide/sections", severity="high", line=3),
        Expected(category="style", lines=(12, 14), line=5),
        Expected(category="completeness", section="page 2", line=7),  # the PDF reader's page heading
        Expected(category="completeness", section="Install > Linux", line=9),
    )
    assert parse_expectations("findings: []\n", "x").findings == ()


@pytest.mark.parametrize(
    "text, line, why",
    [
        ("findings:\n  - category: style\n    line: 3\n", 3, "unknown key 'line' in an expected finding"),
        ("findings:\n  - category: style\n  - severity: high\n", 3, "needs a check or a category"),
        ("findings:\n  - category: styel\n", 2, "category must be one of"),
        ("findings:\n  - category: style\n    lines: 3-x\n", 3, "lines must be N or N-M"),
        ("findings:\n  - category: style\n    lines: 9-4\n", 3, "1 <= N <= M"),
        ("findings:\n  - category: style\n    page: 0\n", 3, "page must be 1 or more"),
        ("findings:\n  - category: style\n    page: 2\n    section: A\n", 3, "give page or section, not both"),
        ("findings:\n  - {category: style, severity: [high]}\n", 2, "severity must be a single value"),
        ("rubric: x\n", 1, "needs findings"),
        ("findings: style\n", 1, "findings must be a list"),
        ("findings:\n  - category: style\n   severity: high\n", 3, "not valid YAML"),
        ("", 1, "the file is empty"),
    ],
)
def test_a_bad_expectations_file_is_one_line_naming_its_file_and_line(text, line, why):
    with pytest.raises(EvaluationError) as caught:
        parse_expectations(text, "docs/guide.expected.yaml")
    message = str(caught.value)
    assert message.startswith(f"docs/guide.expected.yaml:{line}: ") and why in message
    assert "\n" not in message


def write(directory: Path, **files: str) -> Path:
    for name, text in files.items():
        (directory / name.replace("_", ".")).write_text(text)
    return directory


def test_a_golden_set_pairs_each_document_with_its_expectations(tmp_path):
    write(tmp_path, guide_md="# Guide\n", guide_expected_yaml="findings: []\n", notes_txt="not in the set\n")
    [case] = load_cases(str(tmp_path), 10_000, InMemoryRubricCatalog())
    assert (case.name, case.document, case.expected, case.rubric) == ("guide.md", "# Guide\n", (), None)


def test_a_rubric_is_a_name_in_the_catalog_or_a_path_beside_the_expectations(tmp_path):
    team = Rubric("team", "3", (BannedTerms(id="words", terms=("simply",)),))
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "install-guide.yaml").write_text((RUBRICS / "install-guide.yaml").read_text())
    golden = tmp_path / "golden"
    golden.mkdir()
    write(golden, a_md="# A\n", a_expected_yaml="rubric: team\nfindings: []\n")
    write(golden, b_md="# B\n", b_expected_yaml="rubric: ../rubrics/install-guide.yaml\nfindings: []\n")
    a, b = load_cases(str(golden), 10_000, InMemoryRubricCatalog(team))
    assert a.rubric == team
    assert b.rubric is not None and b.rubric.ref == "install-guide@1"


@pytest.mark.parametrize(
    "files, error",
    [
        ({"guide_expected_yaml": "findings: []\n"}, "guide.expected.yaml:1: needs exactly one document named guide"),
        ({"a_md": "x\n", "a_txt": "y\n", "a_expected_yaml": "findings: []\n"}, "found a.md, a.txt"),
        ({"a_md": "# A\n", "a_expected_yaml": "rubric: nope\nfindings: []\n"}, "a.expected.yaml:1: "),
        ({"a_md": "# A\n", "a_expected_yaml": "findings: []\nrubric: ../nope.yaml\n"}, "a.expected.yaml:2: "),
        ({"a_md": "", "a_expected_yaml": "findings: []\n"}, "a.md"),
        ({"a_md": "x\n"}, "no *.expected.yaml file"),
    ],
)
def test_a_bad_golden_set_is_one_line_naming_the_file(tmp_path, files, error):
    with pytest.raises(EvaluationError) as caught:
        load_cases(str(write(tmp_path, **files)), 10_000, InMemoryRubricCatalog())
    assert error in str(caught.value) and "\n" not in str(caught.value)


def test_false_alarms_are_read_as_places_with_no_finding():
    parsed = parse_expectations(
        "findings: []\nfalse_alarms:\n  - category: links\n    lines: 4\n  - check: rubric:a/b\n    section: X\n",
        "faq.expected.yaml",
    )
    assert parsed.findings == () and parsed.false_alarms == (
        Expected(category="links", lines=(4, 4), line=3),
        Expected(check="rubric:a/b", section="X", line=5),
    )
    assert parse_expectations("findings: []\n", "a.expected.yaml").false_alarms == ()
    with pytest.raises(EvaluationError, match=r"b.expected.yaml:2: false_alarms must be a list"):
        parse_expectations("findings: []\nfalse_alarms: links\n", "b.expected.yaml")
    with pytest.raises(EvaluationError, match=r"c.expected.yaml:3: unknown key 'line'"):
        parse_expectations("findings: []\nfalse_alarms:\n  - line: 4\n", "c.expected.yaml")
