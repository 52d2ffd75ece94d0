"""Rubrics offline: the example rubric on its golden document, the rules one by one, and the
errors a bad rubric file gives (file and line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.adapters.rubrics.catalog import YamlRubricCatalog
from docllm.adapters.rubrics.parse import parse_rubric
from docllm.domain.errors import RubricError
from docllm.domain.review.report import finding, make_report, validate_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rubrics"
GOLDEN = (EXAMPLES / "golden" / "acmedb-install.md").read_text()


def rubric(text: str, name: str = "team"):
    return parse_rubric(text, f"{name}.yaml", name)


def found(report: dict) -> list[tuple]:
    return [
        (f.get("check"), f["severity"], f["category"], f["location"]["line_start"], f["quote"])
        for f in report["findings"]
    ]


# -- the example rubric on its golden document ----------------------------------------------------


def test_the_example_rubric_gives_exactly_the_expected_findings_on_the_golden_document():
    guide = YamlRubricCatalog(str(EXAMPLES)).get("install-guide")
    report = OfflineReviewer().review_now("acmedb-install.md", GOLDEN, guide)

    assert validate_report(report) == report
    assert found(report) == [
        ("rubric:install-guide/sections", "high", "completeness", None, ""),  # no Uninstall section
        ("rubric:install-guide/product-names", "medium", "consistency", 3, "Acme DB"),
        ("rubric:install-guide/preferred-terms", "low", "style", 8, "e-mail"),
        ("rubric:install-guide/banned-terms", "low", "style", 13, "Simply"),
        # line 12's URL and line 13's `acmedb-install` are not prose; line 16's "acmedb" is
        ("rubric:install-guide/product-names", "medium", "consistency", 16, "acmedb"),
    ]  # and no Python finding: the rubric parses JSON and YAML blocks only
    assert "Uninstall" in report["findings"][0]["message"]


def test_without_a_rubric_the_review_is_todays():
    report = OfflineReviewer().review_now("acmedb-install.md", GOLDEN)
    assert found(report) == [(None, "medium", "code", 19, "server = connect(")]
    assert all("check" not in f for f in report["findings"])


def test_required_sections_apply_only_to_the_task_names_they_name():
    guide = YamlRubricCatalog(str(EXAMPLES)).get("install-guide")
    report = OfflineReviewer().review_now("release-notes.md", GOLDEN, guide)
    assert "rubric:install-guide/sections" not in {f.get("check") for f in report["findings"]}


# -- the rules ------------------------------------------------------------------------------------


def test_sentence_length_replaces_the_built_in_maximum():
    doc = "# T\n\n" + " ".join(["word"] * 12) + ".\n"
    short = rubric("version: 1\nchecks:\n  - {id: short, kind: sentence-length, max_words: 10}\n")
    assert found(OfflineReviewer().review_now("t", doc)) == []
    assert [f[0] for f in found(OfflineReviewer().review_now("t", doc, short))] == ["rubric:team/short"]


def test_the_built_in_link_check_can_be_turned_off_or_tagged():
    doc = "# T\n\nSee [there](#nowhere).\n"
    off = rubric("version: 1\nchecks:\n  - {id: links, kind: links, enabled: false}\n")
    on = rubric("version: 2\nchecks:\n  - {id: anchors, kind: links}\n")
    assert [f[2] for f in found(OfflineReviewer().review_now("t", doc))] == ["links"]
    assert found(OfflineReviewer().review_now("t", doc, off)) == []
    assert found(OfflineReviewer().review_now("t", doc, on)) == [
        ("rubric:team/anchors", "medium", "links", 3, "[there](#nowhere)")
    ]


def test_names_and_terms_are_matched_in_prose_only_and_as_whole_words():
    doc = (
        "# T\n\nacme-db and Acme_DB and AcmeDB and AcmeDBs.\n\n"
        "Use `acmedb` or https://acmedb.example.com, justify it.\n\n```\nacmedb simply\n```\n"
    )
    checks = rubric(
        "version: 1\nchecks:\n  - {id: names, kind: name-spellings, names: [AcmeDB]}\n"
        "  - {id: words, kind: banned-terms, terms: [just, simply]}\n"
    )
    assert found(OfflineReviewer().review_now("t", doc, checks)) == [
        ("rubric:team/names", "medium", "consistency", 3, "acme-db"),
        ("rubric:team/names", "medium", "consistency", 3, "Acme_DB"),
    ]


# -- bad rubric files -----------------------------------------------------------------------------

BAD = [
    ("version: 1\nchecks:\n  - {id: x, kind: banned-terms, terms: [a]\n", 4, "not valid YAML"),
    ("checks:\n  - {id: x, kind: banned-terms, terms: [a]}\n", 1, "needs a version"),
    ("version: 1\nchecks:\n  - id: x\n    kind: banned-words\n    terms: [a]\n", 4, "unknown kind 'banned-words'"),
    ("version: 1\nchecks:\n  - id: x\n    kind: banned-terms\n    term: [a]\n", 5, "unknown key 'term'"),
    ("version: 1\nchecks:\n  - id: x\n    kind: banned-terms\n    terms: simply\n", 5, "terms must be a list"),
    ("version: 1\nchecks:\n  - id: x\n    kind: banned-terms\n", 3, "needs terms"),
    ("version: 1\nchecks:\n  - {id: a, kind: banned-terms, terms: [x]}\n  - {id: a, kind: links}\n", 4, "used twice"),
    ("version: 1\nchecks:\n  - {id: a, kind: banned-terms, terms: [x], severity: huge}\n", 3, "severity"),
    ("version: 1\nchecks:\n  -\n    id: s\n    kind: sentence-length\n    max_words: many\n", 6, "whole number"),
    ("version: 1\nchecks:\n  - {id: c, kind: code-blocks, languages: [rust]}\n", 3, "languages"),
    ("name: other\nversion: 1\nchecks: []\n", 1, "file's name"),
    ("version: 1\nchecks: []\n", 1, "at least one check"),
    ("", 1, "empty"),
]


@pytest.mark.parametrize(("text", "line", "why"), BAD, ids=[b[2] for b in BAD])
def test_a_bad_rubric_file_is_one_error_naming_its_file_and_line(tmp_path, text, line, why):
    (tmp_path / "team.yaml").write_text(text)
    with pytest.raises(RubricError) as caught:
        YamlRubricCatalog(str(tmp_path)).get("team")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'team.yaml'}:{line}: ") and why in message, message
    assert "\n" not in message


def test_an_edited_rubric_is_read_again_and_a_broken_edit_is_reported(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text("version: 1\nchecks:\n  - {id: a, kind: banned-terms, terms: [x]}\n")
    catalog = YamlRubricCatalog(str(tmp_path))
    assert catalog.get("team").ref == "team@1"
    path.write_text("version: 22\nchecks:\n  - {id: a, kind: banned-terms, terms: [x]}\n")
    os.utime(path, ns=(1, 1))  # a different stamp, whatever the file system's clock resolution
    assert catalog.get("team").ref == "team@22"
    path.write_text("version: 22\nchecks:\n  - {id: a, kind: banned-terms, terms: 3}\n")
    with pytest.raises(RubricError, match=r"team.yaml:3: terms must be a list"):
        catalog.get("team")


# -- the finding's check field --------------------------------------------------------------------


def test_a_findings_check_is_kept_optional_and_must_be_text():
    old = make_report([finding("style", "low", "Old finding.")], "s", "offline", "m")
    assert "check" not in old["findings"][0] and validate_report(old) == old  # reports before rubrics
    tagged = {**old, "findings": [{**old["findings"][0], "check": "rubric:team/words"}]}
    assert validate_report(tagged)["findings"][0]["check"] == "rubric:team/words"
    with pytest.raises(ValueError, match=r"findings\[0\]\.check must be a string"):
        validate_report({**old, "findings": [{**old["findings"][0], "check": 3}]})


# -- markers in code (issue 48): off by default, a rubric can ask for them ------------------------

MARKED = "# A\n\nRun `make # TODO` first.\n\n```bash\necho hi  # FIXME\n```\n\nTBD: the rest.\n"


@pytest.mark.parametrize(
    "checks, lines",
    [
        ("  - {id: bans, kind: banned-terms, terms: [simply]}\n", [9]),  # the built-in check: prose only
        ("  - {id: todo, kind: markers, in_code: true}\n", [3, 6, 9]),
        ("  - {id: todo, kind: markers, enabled: false}\n", []),
    ],
)
def test_a_rubric_can_ask_for_markers_in_code_or_none(checks, lines):
    team = rubric(f"version: 1\nchecks:\n{checks}")
    report = OfflineReviewer().review_now("t", MARKED, team)
    assert [f["location"]["line_start"] for f in report["findings"] if "marker" in f["message"]] == lines


def test_in_code_is_a_key_of_markers_only():
    with pytest.raises(RubricError, match="unknown key 'in_code' in a links check"):
        rubric("version: 1\nchecks:\n  - {id: l, kind: links, in_code: true}\n")
