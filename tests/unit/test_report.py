"""The report schema: validation that names the bad field, normalisation, merging of chunk reports."""

from __future__ import annotations

import pytest

from docllm.domain.errors import PermanentError
from docllm.domain.review.answer_schema import SCHEMA_VERSION
from docllm.domain.review.chat import chunk_report
from docllm.domain.review.chunking import split_markdown
from docllm.domain.review.prompt import PROMPT_VERSION
from docllm.domain.review.report import (
    finding,
    make_report,
    merge_reports,
    parse_answer,
    require_reviewable,
    validate_answer,
    validate_report,
)

VERSIONS = {"prompt_version", "schema_version", "rubric_version"}


def report(*findings, chunks=1, usage=(3, 2), summary="ok"):
    usage_counts = dict(zip(("prompt_tokens", "completion_tokens"), usage, strict=True))
    return make_report(list(findings), summary, "openai", "m", chunks, usage_counts)


def test_a_built_report_is_valid_and_complete():
    r = report(finding("links", "medium", "Broken anchor.", heading="A > B", line_start=4, quote="[x](#y)"))
    assert validate_report(r) == r
    assert r["findings"][0]["location"] == {"heading": "A > B", "line_start": 4, "line_end": 4}
    assert set(r) == {"findings", "summary", "reviewer", "model", "chunks", "usage"} | VERSIONS
    assert (r["prompt_version"], r["schema_version"], r["rubric_version"]) == (None, SCHEMA_VERSION, None)


def test_a_report_keeps_the_versions_that_made_it_through_a_merge():
    one, two = (make_report([], "s", "openai", "m", prompt_version=PROMPT_VERSION, rubric_version="3") for _ in "ab")
    merged = merge_reports([one, two])
    assert (merged["prompt_version"], merged["schema_version"], merged["rubric_version"]) == (
        PROMPT_VERSION,
        SCHEMA_VERSION,
        "3",
    )


def test_a_model_answer_is_normalised_into_the_schema_spelling():
    answer = validate_answer(
        {
            "summary": "s",
            "findings": [
                {
                    "category": " Clarity ",
                    "severity": "LOW",
                    "message": "Vague.",
                    "location": "Intro",
                    "quote": None,
                },
                {
                    "category": "code",
                    "severity": "high",
                    "message": "Bad.",
                    "location": {"line_start": "7", "line_end": 5},
                },
            ],
        }
    )
    first, second = answer["findings"]
    assert (first["category"], first["severity"], first["quote"], first["suggestion"]) == ("clarity", "low", "", "")
    assert first["location"] == {"heading": "Intro", "line_start": None, "line_end": None}
    assert set(first) == {"category", "severity", "location", "quote", "message", "suggestion"}
    assert second["location"] == {"heading": "", "line_start": 7, "line_end": 7}


@pytest.mark.parametrize(
    "bad, field",
    [
        ([], "the answer must be an object"),
        ({"summary": "s"}, "findings is missing"),
        ({"findings": {}, "summary": "s"}, "findings must be a list"),
        ({"findings": [], "summary": 3}, "summary"),
        ({"findings": ["x"]}, r"findings[0] must be an object"),
        ({"findings": [{"category": "style!", "severity": "low", "message": "m"}]}, "findings[0].category"),
        ({"findings": [{"category": "code", "severity": "urgent", "message": "m"}]}, "findings[0].severity"),
        ({"findings": [{"category": "code", "severity": "low", "message": " "}]}, "findings[0].message"),
        ({"findings": [{"category": "code", "severity": "low"}]}, "findings[0].message is missing"),
        ({"findings": [{"category": "code", "severity": "low", "message": "m", "quote": 3}]}, "findings[0].quote"),
        (
            {"findings": [{"category": "code", "severity": "low", "message": "m", "location": {"line_start": 0}}]},
            "findings[0].location.line_start",
        ),
        (
            {"findings": [{"category": "code", "severity": "low", "message": "m", "location": [1]}]},
            "findings[0].location must be an object",
        ),
    ],
)
def test_a_bad_answer_names_its_bad_field(bad, field):
    with pytest.raises(ValueError) as caught:
        validate_answer(bad)
    assert field in str(caught.value)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"reviewer": "gpt"}, "reviewer"),
        ({"model": None}, "model"),
        ({"chunks": -1}, "chunks"),
        ({"usage": None}, "usage"),
        ({"usage": {"prompt_tokens": 1, "completion_tokens": True}}, "usage.completion_tokens"),
        ({"schema_version": None}, "schema_version"),
        ({"prompt_version": "v1"}, "prompt_version"),
        ({"rubric_version": 1.5}, "rubric_version"),
    ],
)
def test_a_bad_report_names_its_bad_field(change, field):
    with pytest.raises(ValueError, match=field):
        validate_report({**report(), **change})


def test_merge_folds_duplicates_keeping_the_higher_severity_and_sums_the_rest():
    general = finding("completeness", "low", "No  conclusion.")
    one = report(finding("links", "medium", "Broken.", line_start=3), general, summary="Part one.")
    two = report(
        finding("links", "medium", "Broken.", line_start=30),
        {**general, "message": "no conclusion.", "severity": "high"},
        summary="Part two.",
    )
    merged = merge_reports([one, two])
    assert [(f["message"], f["severity"], f["location"]["line_start"]) for f in merged["findings"]] == [
        ("Broken.", "medium", 3),
        ("No  conclusion.", "high", None),
        ("Broken.", "medium", 30),
    ]
    assert (merged["chunks"], merged["usage"]) == (2, {"prompt_tokens": 6, "completion_tokens": 4})
    assert merged["summary"] == "Part one. Part two."
    assert validate_report(merged) == merged


def test_merge_needs_something_to_merge():
    with pytest.raises(ValueError):
        merge_reports([])


def test_an_answer_text_may_be_fenced_but_must_be_json():
    assert parse_answer('```json\n{"findings": [], "summary": "ok"}\n```') == {"findings": [], "summary": "ok"}
    for text, reason in (("", "empty"), ("Looks fine!", "not JSON"), ('{"findings": {}}', "findings must be a list")):
        with pytest.raises(ValueError, match=reason):
            parse_answer(text)


@pytest.mark.parametrize("document", [None, "", " \n", "bin\x00ary"])
def test_an_empty_or_binary_document_cannot_be_reviewed(document):
    with pytest.raises(PermanentError):
        require_reviewable(document)


def test_fields_the_schema_does_not_name_are_left_out_not_refused():
    """A model's own extra words ("confidence", a "verdict") would otherwise cost a repair request
    and charge the document; they are dropped, and the rest is checked as usual."""
    answer = validate_answer(
        {
            "findings": [
                {
                    "category": "code",
                    "severity": "low",
                    "message": "m",
                    "confidence": 0.7,
                    "location": {"heading": "A", "line_start": 2, "page": 1},
                }
            ],
            "summary": "s",
            "verdict": "ok",
        }
    )
    assert answer == {
        "findings": [
            {
                "category": "code",
                "severity": "low",
                "message": "m",
                "quote": "",
                "suggestion": "",
                "location": {"heading": "A", "line_start": 2, "line_end": 2},
            }
        ],
        "summary": "s",
    }


@pytest.mark.parametrize("deployments", [None, ["a"]])
def test_a_merged_report_is_what_checking_it_whole_would_make(deployments):
    """The merge folds checked reports without checking again: what it makes must pass the check
    unchanged, in the same field order (stored reports read alike whichever path made them)."""
    low = finding("links", "low", "Broken anchor.", heading="A", line_start=4, quote="[x](#y)")
    high = {**low, "severity": "high"}
    other = finding("clarity", "medium", "Vague.", heading="B", line_start=9, line_end=11)
    made = [
        make_report(
            fs, "s", "openai", "m", 1, {"prompt_tokens": 3}, prompt_version=PROMPT_VERSION, deployments=deployments
        )
        for fs in ([low, other], [high])
    ]
    merged = merge_reports(made)
    checked = validate_report(merged)
    assert checked == merged
    assert list(checked) == list(merged)
    assert [f["severity"] for f in merged["findings"]] == ["high", "medium"]


@pytest.mark.parametrize(
    "answer",
    [
        '{"findings": [], "summary": "fine"}',
        '{"findings": [{"category": "Clarity", "severity": "HIGH", "message": "Vague.", "quote": "line two",'
        ' "location": {"heading": "", "line_start": "2", "line_end": 1}}], "summary": null}',
        '{"findings": [{"category": "links", "severity": "low", "message": "Far.", "quote": "nowhere",'
        ' "location": {"heading": "B", "line_start": 40, "line_end": 90}}], "summary": "s"}',
        '{"findings": [{"category": "links", "severity": "low", "message": "Quoted.", "quote": "line three",'
        ' "location": "A"}], "summary": "s", "confidence": 0.3}',
    ],
)
@pytest.mark.parametrize("deployment", [None, "east"])
def test_a_chunks_report_is_what_checking_it_whole_would_make(answer, deployment):
    """``chunk_report`` places a checked answer's findings without checking again: what it makes
    must pass the check unchanged, in the same field order."""
    chunk = split_markdown("# A\n\nline one\nline two\nline three\n", 10_000)[0]
    made = chunk_report(parse_answer(answer), chunk, "m", {"prompt_tokens": 5, "completion_tokens": 2}, deployment)
    checked = validate_report(made)
    assert checked == made
    assert list(checked) == list(made)
