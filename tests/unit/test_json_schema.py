"""The one-schema validator: each rule of the answer schema refused where it is broken, by name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from docllm.domain.review.answer_schema import ANSWER_SCHEMA, FINDING_SCHEMA, LOCATION_SCHEMA
from docllm.domain.review.json_schema import check

FINDING: dict[str, Any] = {
    "category": "links",
    "severity": "high",
    "location": {"heading": "Install", "line_start": 3, "line_end": None},
    "quote": "[x](#y)",
    "message": "Broken anchor.",
    "suggestion": "",
    "check": None,
}
ANSWER: dict[str, Any] = {"findings": [FINDING], "summary": "One broken link."}


def without(obj: dict, *path: str) -> dict:
    out = copy.deepcopy(obj)
    inner = out
    for key in path[:-1]:
        inner = inner[key] if isinstance(inner, dict) else inner[int(key)]
    del inner[path[-1]]
    return out


def test_a_valid_answer_passes():
    check(ANSWER_SCHEMA, ANSWER)
    check(ANSWER_SCHEMA, {"findings": [], "summary": ""})


@pytest.mark.parametrize("field", list(ANSWER_SCHEMA["properties"]))
def test_each_required_field_of_the_answer_missing_is_named(field):
    with pytest.raises(ValueError, match=rf"^{field} is missing$"):
        check(ANSWER_SCHEMA, without(ANSWER, field))


@pytest.mark.parametrize("field", list(FINDING_SCHEMA["properties"]))
def test_each_required_field_of_a_finding_missing_is_named(field):
    with pytest.raises(ValueError, match=rf"^findings\[0\]\.{field} is missing$"):
        check(ANSWER_SCHEMA, without(ANSWER, "findings", "0", field))


@pytest.mark.parametrize("field", list(LOCATION_SCHEMA["properties"]))
def test_each_required_field_of_a_location_missing_is_named(field):
    with pytest.raises(ValueError, match=rf"^findings\[0\]\.location\.{field} is missing$"):
        check(ANSWER_SCHEMA, without(ANSWER, "findings", "0", "location", field))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"findings": {}}, "findings must be a list, got object"),
        ({"summary": None}, "summary must be a string, got null"),
        ({"findings": ["x"]}, r"findings\[0\] must be an object, got string"),
        ({"findings": [{**FINDING, "severity": "urgent"}]}, r"findings\[0\]\.severity must be one of low, "),
        ({"findings": [{**FINDING, "category": 3}]}, r"findings\[0\]\.category must be a string, got integer"),
        ({"findings": [{**FINDING, "quote": None}]}, r"findings\[0\]\.quote must be a string, got null"),
        ({"findings": [{**FINDING, "location": None}]}, r"findings\[0\]\.location must be an object, got null"),
        (
            {"findings": [{**FINDING, "location": {**FINDING["location"], "line_start": "3"}}]},
            r"line_start must be an integer or null, got string",
        ),
        (
            {"findings": [{**FINDING, "location": {**FINDING["location"], "line_end": True}}]},
            r"line_end must be an integer or null, got boolean",
        ),
        (
            {"findings": [{**FINDING, "location": {**FINDING["location"], "line_start": 2.5}}]},
            r"line_start must be an integer or null, got number",
        ),
        (
            {"findings": [{**FINDING, "location": {**FINDING["location"], "line_start": 0}}]},
            r"findings\[0\]\.location\.line_start must be at least 1, got 0",
        ),
    ],
)
def test_a_wrong_type_or_value_is_named(change, message):
    with pytest.raises(ValueError, match=message):
        check(ANSWER_SCHEMA, {**ANSWER, **change})


def test_the_whole_answer_of_the_wrong_type_is_named():
    with pytest.raises(ValueError, match="^the answer must be an object, got list$"):
        check(ANSWER_SCHEMA, [])


@pytest.mark.parametrize(
    "answer, field",
    [
        ({**ANSWER, "verdict": "ok"}, "verdict"),
        ({**ANSWER, "findings": [{**FINDING, "confidence": 0.9}]}, r"findings\[0\]\.confidence"),
        (
            {**ANSWER, "findings": [{**FINDING, "location": {**FINDING["location"], "page": 2}}]},
            r"findings\[0\]\.location\.page",
        ),
    ],
)
def test_an_extra_property_is_refused(answer, field):
    with pytest.raises(ValueError, match=rf"^{field} is not a field of the schema$"):
        check(ANSWER_SCHEMA, answer)


def test_a_keyword_the_validator_does_not_know_is_refused_not_skipped():
    with pytest.raises(TypeError, match="maxLength"):
        check({"type": "string", "maxLength": 3}, "abcd")
