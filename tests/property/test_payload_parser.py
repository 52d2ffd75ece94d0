"""The payload parser against arbitrary input (issue 13, item 7): it returns a valid reference or
raises ``BadPayload``, never anything else. Found by hand: ``{"task_id": "²"}`` passed
``str.isdigit`` and then ``int()`` raised ``ValueError``, which failed every reconciler cycle."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from docllm.domain.errors import BadPayload
from docllm.domain.tasks.payload import MAX_TASK_ID, parse_payload, task_id_of

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
digit_like = st.text(
    st.characters(categories=["Nd", "No", "Nl", "Zs"]) | st.sampled_from("-+ 0123456789_"), max_size=25
)
task_ids = json_values | digit_like | st.integers(min_value=-(2**70), max_value=2**70)
objects = st.fixed_dictionaries({"task_id": task_ids}, optional={"task_name": json_values})


def _checked(raw: str | bytes) -> None:
    try:
        ref = parse_payload(raw, 64 * 1024)
    except BadPayload:
        assert task_id_of(raw) is None
        return
    assert type(ref.task_id) is int and 0 < ref.task_id <= MAX_TASK_ID
    assert ref.task_name is None or isinstance(ref.task_name, str)
    assert task_id_of(raw) == ref.task_id


@given(objects)
@example({"task_id": "²"})  # isdigit() says yes, int() says no
@example({"task_id": "٣"})  # an Arabic-Indic three: int() accepts it, no producer sends it
@example({"task_id": "1" * 5000})  # over int()'s digit limit
@example({"task_id": 2**53})  # over what the Lua scripts can read exactly
def test_an_object_with_any_task_id_parses_or_is_bad(data):
    _checked(json.dumps(data))


@given(json_values)
def test_any_json_parses_or_is_bad(data):
    _checked(json.dumps(data))


@given(st.text() | st.binary())
@example("[" * 100_000)  # deeper than the recursion limit
@example(b'{"task_id": 1, "x": "\xff"}')
@example('{"task_id": 1, "x": "\udcff"}')  # bytes that were not UTF-8, carried as a surrogate escape
def test_any_text_or_bytes_parse_or_are_bad(raw):
    _checked(raw)


@pytest.mark.parametrize(
    "raw",
    [
        '{"task_id": "²"}',
        '{"task_id": "٣"}',
        '{"task_id": "1_000"}',
        '{"task_id": "+5"}',
        '{"task_id": 9007199254740992}',
    ],
)
def test_the_odd_digits_found_are_bad_payloads(raw):
    with pytest.raises(BadPayload):
        parse_payload(raw, 1024)


def test_the_producer_forms_still_parse():
    assert parse_payload('{"task_id": " 12 ", "task_name": "a"}', 1024).task_id == 12
    assert parse_payload('{"task_id": 9007199254740991}', 1024).task_id == MAX_TASK_ID
    assert task_id_of('{"task_id": 3}') == 3 and task_id_of("nope") is None
