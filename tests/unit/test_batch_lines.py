"""The batch lane's pure domain (issue 28): the lines a batch sends, how its output and error files
become each member task's result, what a failed line means to the verdict model, batch prices."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docllm.domain.batches.lines import ENDPOINT, LineId, custom_id, parse_custom_id, request_lines
from docllm.domain.batches.results import ChunkFailure, State, Tokens, read_results
from docllm.domain.batches.verdict import error_of, facts_of_failure, task_facts
from docllm.domain.errors import ConfigurationError, PermanentError, ProviderUnavailable, TransientError
from docllm.domain.llm.prices import Price, batch_price
from docllm.domain.review.chat import STRICT_SCHEMA, chat_body
from docllm.domain.review.prompt import build_messages
from docllm.domain.tasks.outcome import OutcomeKind, Reason
from docllm.domain.tasks.verdict import decide

ANSWER = {"findings": [], "summary": "Fine."}


def completion(answer: Any = ANSWER, prompt: int = 100, completion_tokens: int = 20, cached: int = 0) -> dict:
    content = answer if isinstance(answer, str) else json.dumps(answer)
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def ok(task: int, attempt: int, chunk: int, **kw: Any) -> dict:
    body = completion(**kw)
    return {
        "id": f"batch_req_{task}_{attempt}_{chunk}",
        "custom_id": custom_id(task, attempt, chunk),
        "response": {"status_code": 200, "request_id": "req_1", "body": body},
        "error": None,
    }


def failed(task: int, attempt: int, chunk: int, status: int, code: str | None = None, message: str = "no") -> dict:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return {
        "id": f"batch_req_{task}_{attempt}_{chunk}",
        "custom_id": custom_id(task, attempt, chunk),
        "response": {"status_code": status, "request_id": "req_2", "body": body},
        "error": None,
    }


def expired(task: int, attempt: int, chunk: int) -> dict:
    return {
        "id": f"batch_req_{task}_{attempt}_{chunk}",
        "custom_id": custom_id(task, attempt, chunk),
        "response": None,
        "error": {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        },
    }


# --- custom_id


def test_custom_id_spells_task_attempt_and_chunk():
    assert custom_id(42, 3, 0) == "docllm:42:3:0"
    assert parse_custom_id("docllm:42:3:0") == LineId(42, 3, 0)


@pytest.mark.parametrize(
    "text",
    [
        "docllm:1:2",
        "docllm:1:2:3:4",
        "docllm:01:2:3",
        "docllm:-1:2:3",
        "docllm:+1:2:3",
        " docllm:1:2:3",
        "docllm:1:2:3\n",
        "other:1:2:3",
        "request-1",
        "docllm:1:x:3",
        "",
        None,
        7,
    ],
)
def test_a_custom_id_we_did_not_write_is_refused_readably(text):
    with pytest.raises(ValueError, match="is not docllm's: expected 'docllm:TASK_ID:ATTEMPT:CHUNK'"):
        parse_custom_id(text)


@pytest.mark.parametrize("parts", [(-1, 1, 0), (1, -1, 0), (1, 1, -1), (True, 1, 0), (1.0, 1, 0)])
def test_custom_id_refuses_what_it_could_not_read_back(parts):
    with pytest.raises(ValueError, match="must be an integer >= 0"):
        custom_id(*parts)


@given(st.integers(min_value=0), st.integers(min_value=0), st.integers(min_value=0))
def test_custom_id_round_trips_for_any_integers(task, attempt, chunk):
    assert parse_custom_id(custom_id(task, attempt, chunk)) == (task, attempt, chunk)


@given(st.integers(), st.integers(), st.integers())
def test_custom_id_writes_only_what_it_reads(task, attempt, chunk):
    try:
        text = custom_id(task, attempt, chunk)
    except ValueError:
        assert min(task, attempt, chunk) < 0
    else:
        assert parse_custom_id(text) == (task, attempt, chunk)


# --- request lines

DOCUMENT = "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n## Use\n\nCall it.\n"


def test_one_line_per_chunk_with_the_realtime_body_on_the_first_rung():
    lines = request_lines(9, 4, "guide", DOCUMENT, None, "m1", 20)
    assert [line["custom_id"] for line in lines] == [f"docllm:9:4:{i}" for i in range(len(lines))]
    assert len(lines) == 3
    assert all(line["method"] == "POST" and line["url"] == ENDPOINT == "/v1/chat/completions" for line in lines)
    second = lines[1]["body"]
    assert second == chat_body(
        "m1", build_messages("guide", "## Install\n\nRun it.\n", "Guide > Install", 2, 3), STRICT_SCHEMA
    )
    assert second["response_format"]["type"] == "json_schema" and set(second) == {
        "model",
        "messages",
        "response_format",
    }
    assert all(json.loads(json.dumps(line)) == line for line in lines)  # JSONL as it is


def test_a_short_document_is_one_line_and_an_empty_one_none():
    assert len(request_lines(1, 1, "t", DOCUMENT, None, "m", 10_000)) == 1
    with pytest.raises(PermanentError, match="empty"):
        request_lines(1, 1, "t", "  \n", None, "m", 100)


# --- read_results


def test_a_task_whose_chunks_all_answered_is_answered_with_usage_summed():
    finding = {
        "category": "clarity",
        "severity": "low",
        "location": {"heading": "", "line_start": 1, "line_end": 1},
        "quote": "Intro.",
        "message": "Say more.",
        "suggestion": "",
    }
    lines = [
        ok(5, 2, 1, answer={"findings": [finding], "summary": "B."}, prompt=50, completion_tokens=5, cached=10),
        json.dumps(ok(5, 2, 0, prompt=70, completion_tokens=7, cached=30)),  # as text: a JSONL line
        "",  # the file's last newline
    ]
    results = read_results(lines, {5: (2, 2)})
    task = results.tasks[5]
    assert task.state is State.answered and results.served
    assert [a.chunk for a in task.answers] == [0, 1] and task.failures == () and task.missing == ()
    assert task.tokens == Tokens(prompt=120, cached=40, completion=12)
    assert task.answers[1].answer["findings"][0]["message"] == "Say more."
    assert results.rejected == results.stale == results.conflicts == () and results.duplicates == 0


def test_the_report_places_each_chunks_findings_and_merges_as_realtime():
    from docllm.domain.review.chunking import split_markdown

    chunks = split_markdown(DOCUMENT, 20)
    finding = {
        "category": "clarity",
        "severity": "high",
        "location": {"heading": "", "line_start": 3, "line_end": 3},
        "quote": "Run it.",
        "message": "Say how.",
        "suggestion": "",
    }
    lines = [ok(5, 1, c, answer={"findings": [finding] if c == 1 else [], "summary": f"S{c}."}) for c in range(3)]
    report = read_results(lines, {5: (1, 3)}).tasks[5].report(chunks, "m1", deployment="east")
    assert report["chunks"] == 3 and report["summary"] == "S0. S1. S2."
    assert report["findings"][0]["location"] == {"heading": "Guide > Install", "line_start": 7, "line_end": 7}
    assert report["usage"] == {"prompt_tokens": 300, "completion_tokens": 60}
    assert report["deployments"] == ["east"] * 3 and report["reviewer"] == "openai" and report["model"] == "m1"
    with pytest.raises(ValueError, match="2 chunks given, the batch sent 3"):
        read_results(lines, {5: (1, 3)}).tasks[5].report(chunks[:2], "m1")


def test_a_task_with_a_failed_chunk_is_failed_with_its_status_and_error():
    lines = [ok(5, 1, 0), failed(5, 1, 1, 400, "context_length_exceeded", "This model's maximum context length...")]
    task = read_results(lines, {5: (1, 2)}).tasks[5]
    assert task.state is State.failed
    (failure,) = task.failures
    assert (failure.chunk, failure.status, failure.code) == (1, 400, "context_length_exceeded")
    assert failure.message.startswith("This model's maximum")


def test_an_error_file_line_without_a_response_is_a_failure_with_its_code():
    task = read_results([expired(5, 1, 0)], {5: (1, 1)}).tasks[5]
    assert task.state is State.failed
    assert (task.failures[0].status, task.failures[0].code) == (None, "batch_expired")


def test_an_answer_that_is_not_a_valid_report_fails_its_chunk_and_keeps_its_usage():
    lines = [ok(5, 1, 0, answer="I think the document is fine.", prompt=40, completion_tokens=9)]
    task = read_results(lines, {5: (1, 1)}).tasks[5]
    assert task.state is State.failed
    assert (task.failures[0].status, task.failures[0].code) == (200, "invalid_answer")
    assert "not JSON" in task.failures[0].message and task.tokens == Tokens(40, 0, 9)


def test_a_chunk_without_any_line_leaves_its_task_missing():
    results = read_results([ok(5, 1, 0), ok(6, 1, 0)], {5: (1, 2), 6: (1, 1), 7: (3, 1)})
    assert results.tasks[5].state is State.missing and results.tasks[5].missing == (1,)
    assert results.tasks[6].state is State.answered
    assert results.tasks[7].state is State.missing and results.tasks[7].missing == (0,)
    assert [t.task_id for t in results.of(State.missing)] == [5, 7]


def test_the_same_file_read_twice_counts_each_line_once():
    file = [json.dumps(ok(5, 1, 0)), json.dumps(failed(6, 1, 0, 500))]
    once = read_results(file, {5: (1, 1), 6: (1, 1)})
    twice = read_results(file + file + [ok(5, 1, 0)], {5: (1, 1), 6: (1, 1)})
    assert twice.tasks == once.tasks and twice.duplicates == 3 and twice.conflicts == ()
    assert twice.tasks[5].tokens == Tokens(100, 0, 20)


def test_a_conflicting_second_line_is_noted_and_the_first_kept():
    results = read_results([ok(5, 1, 0), failed(5, 1, 0, 500)], {5: (1, 1)})
    assert results.tasks[5].state is State.answered
    (conflict,) = results.conflicts
    assert (conflict.line, conflict.custom_id) == (2, "docllm:5:1:0") and "first is kept" in conflict.reason


def test_lines_of_another_attempt_or_task_are_dropped_and_reported():
    lines = [ok(5, 2, 0), ok(5, 4, 0), ok(8, 1, 0)]
    results = read_results(lines, {5: (3, 1)})
    assert results.tasks[5].state is State.missing
    assert [(d.line, d.custom_id) for d in results.stale] == [
        (1, "docllm:5:2:0"),
        (2, "docllm:5:4:0"),
        (3, "docllm:8:1:0"),
    ]
    assert "attempt 2 is stale: the batch runs attempt 3" in results.stale[0].reason
    assert "task 8 is not a member" in results.stale[2].reason


def test_malformed_lines_are_rejected_with_a_reason_and_the_rest_still_count():
    good = ok(5, 1, 1)
    lines = [
        "{not json",
        "[1, 2]",
        json.dumps({**good, "custom_id": "req-17"}),
        json.dumps({**good, "custom_id": "docllm:5:1:9"}),
        json.dumps({**good, "response": "200 OK"}),
        json.dumps({**good, "response": {"status_code": "200", "body": {}}}),
        json.dumps({"custom_id": "docllm:5:1:0", "response": None, "error": None}),
        b'{"custom_id": "docllm:5:1:0", "response": {"status_code": true}}',
        b"\xff\xfe",
        ok(5, 1, 0),
        good,
    ]
    results = read_results(lines, {5: (1, 2)})
    assert results.tasks[5].state is State.answered
    reasons = [(d.line, d.reason) for d in results.rejected]
    assert [line for line, _ in reasons] == list(range(1, 10))
    assert "not JSON" in reasons[0][1] and "not a JSON object but list" in reasons[1][1]
    assert "custom_id 'req-17' is not docllm's" in reasons[2][1]
    assert "chunk 9 is out of range: task 5 was sent 2 chunk(s)" in reasons[3][1]
    assert "response is not an object" in reasons[4][1] and "status_code is not an integer" in reasons[5][1]
    assert "neither a response nor an error" in reasons[6][1] and "status_code is not an integer" in reasons[7][1]
    assert results.rejected[3].custom_id == "docllm:5:1:9" and results.rejected[0].custom_id is None


def test_a_usage_beyond_belief_is_noted_and_not_counted():
    line = ok(5, 1, 0)
    line["response"]["body"]["usage"]["prompt_tokens"] = 1e30
    results = read_results([line], {5: (1, 1)})
    assert results.tasks[5].state is State.answered and results.tasks[5].tokens == Tokens()
    assert results.notes and "beyond belief" in results.notes[0] and results.notes[0].startswith("docllm:5:1:0")


def test_usage_at_the_batch_price():
    task = read_results(
        [ok(5, 1, 0, prompt=1_000_000, completion_tokens=1_000_000, cached=400_000)], {5: (1, 1)}
    ).tasks[5]
    usage = task.usage("m1", batch_price(Price(2.0, 8.0, 1.0)))
    assert (usage.calls, usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (
        1,
        1_000_000,
        400_000,
        1_000_000,
    )
    assert usage.cost_usd == pytest.approx(0.6 * 1.0 + 0.4 * 0.5 + 4.0)
    assert task.usage("m1", None).cost_usd is None


# --- what a failed line means to the verdict model


def failure(status: int | None, code: str | None = None, message: str = "x", param: str | None = None) -> ChunkFailure:
    return ChunkFailure(0, status, code, message, param)


@pytest.mark.parametrize(
    "line, served, handbacks, kind, reason, counted",
    [
        # the document's fault: fails now, as a realtime 400 does
        (
            failure(400, "context_length_exceeded", "maximum context length"),
            True,
            0,
            OutcomeKind.permanent,
            Reason.permanent_error,
            False,
        ),
        (failure(400, "invalid_request_error"), False, 0, OutcomeKind.permanent, Reason.permanent_error, False),
        (failure(422), True, 0, OutcomeKind.permanent, Reason.permanent_error, False),
        # an invalid answer: charged (a batch asks for no repair)
        (failure(200, "invalid_answer"), True, 0, OutcomeKind.retryable, Reason.transient_error, False),
        # a refusal while the batch served others: the document's, charged
        (failure(403), True, 0, OutcomeKind.retryable, Reason.refused_document, False),
        # the provider's: handed back, counted towards the bound while the batch served others...
        (failure(500), True, 0, OutcomeKind.release, Reason.provider_failed, True),
        (failure(429, "rate_limit_exceeded"), True, 1, OutcomeKind.release, Reason.provider_failed, True),
        (failure(503), True, 3, OutcomeKind.retryable, Reason.llm_unavailable, False),  # ...charged past it (I12)
        # nothing of the batch answered: the provider's or the configuration's, never counted
        (failure(500), False, 3, OutcomeKind.release, Reason.llm_outage, False),
        (failure(401), False, 0, OutcomeKind.release, Reason.llm_configuration, False),
        # the window closed: never the document's, whatever else the batch did
        (failure(None, "batch_expired"), True, 3, OutcomeKind.release, Reason.llm_outage, False),
        (failure(None, "batch_cancelled"), True, 0, OutcomeKind.release, Reason.llm_outage, False),
        # a refused response_format is not the document's: handed back, counted
        (
            failure(400, None, "Invalid parameter", "response_format"),
            True,
            0,
            OutcomeKind.release,
            Reason.provider_failed,
            True,
        ),
    ],
)
def test_a_failed_line_is_charged_or_handed_back_by_the_one_verdict(line, served, handbacks, kind, reason, counted):
    outcome = decide(facts_of_failure(line, served, handbacks=handbacks, max_handbacks=3, model="m1"))
    assert (outcome.kind, outcome.reason, outcome.counted) == (kind, reason, counted)


@pytest.mark.parametrize(
    "line, error",
    [
        (failure(400, "context_length_exceeded"), PermanentError),
        (failure(404), ConfigurationError),
        (failure(429, "insufficient_quota"), ConfigurationError),
        (failure(500), ProviderUnavailable),
        (failure(None, "batch_expired"), ProviderUnavailable),
        (failure(200, "invalid_answer"), TransientError),
    ],
)
def test_a_failed_line_is_the_error_a_realtime_request_would_raise(line, error):
    assert type(error_of(line, "m1")) is error


def test_a_task_is_judged_by_its_first_failed_chunk_else_its_missing_ones():
    lines = [failed(5, 1, 2, 500), failed(5, 1, 1, 400, "context_length_exceeded")]
    results = read_results(lines, {5: (1, 3), 6: (1, 2)})
    assert decide(task_facts(results.tasks[5], results.served)).kind is OutcomeKind.permanent
    lost = decide(task_facts(results.tasks[6], results.served, handbacks=9))
    assert (lost.kind, lost.counted) == (OutcomeKind.release, False) and "chunk(s) 0, 1" in (lost.error or "")
    with pytest.raises(ValueError, match="was answered"):
        task_facts(read_results([ok(7, 1, 0)], {7: (1, 1)}).tasks[7], True)


# --- batch prices


def test_the_batch_price_is_half_of_each_rate_unless_given():
    assert batch_price(Price(2.0, 8.0, 1.0)) == Price(1.0, 4.0, 0.5)
    assert batch_price(Price(2.0, 8.0)) == Price(1.0, 4.0, None)  # cached: the batch input price, as in realtime
    given = {"batch_input": 0.9, "batch_output": 3.0}
    assert batch_price(Price(2.0, 8.0, 1.0), given) == Price(0.9, 3.0, 0.5)
    assert batch_price(Price(2.0, 8.0), {"batch_cached_input": 0.1}) == Price(1.0, 4.0, 0.1)


# --- properties: order, repeats, attempts

KINDS = ("ok", "500", "400", "expired", "none")


@st.composite
def batches(draw: Any) -> tuple[dict[int, tuple[int, int]], list[dict], dict[int, list[str]]]:
    """Members, the lines of their files (current attempts' and stale ones'), and each chunk's kind."""
    task_ids = draw(st.lists(st.integers(1, 10_000), min_size=1, max_size=6, unique=True))
    members: dict[int, tuple[int, int]] = {}
    lines: list[dict] = []
    kinds: dict[int, list[str]] = {}
    for task in task_ids:
        attempt, n = draw(st.integers(1, 5)), draw(st.integers(1, 4))
        members[task] = (attempt, n)
        kinds[task] = [draw(st.sampled_from(KINDS)) for _ in range(n)]
        for chunk, kind in enumerate(kinds[task]):
            lines.extend(_line(task, attempt, chunk, kind))
        for _ in range(draw(st.integers(0, 3))):  # lines of earlier or later attempts, always answered
            other = draw(st.sampled_from([a for a in range(7) if a != attempt]))
            lines.append(ok(task, other, draw(st.integers(0, n - 1))))
    return members, lines, kinds


def _line(task: int, attempt: int, chunk: int, kind: str) -> list[dict]:
    if kind == "ok":
        return [ok(task, attempt, chunk, prompt=10 + chunk, completion_tokens=chunk, cached=chunk)]
    if kind == "500":
        return [failed(task, attempt, chunk, 500, message="The server had an error.")]
    if kind == "400":
        return [failed(task, attempt, chunk, 400, "context_length_exceeded")]
    if kind == "expired":
        return [expired(task, attempt, chunk)]
    return []


@given(batches(), st.randoms(use_true_random=False))
def test_results_do_not_depend_on_the_order_of_the_lines(batch, rnd):
    members, lines, _ = batch
    shuffled = list(lines)
    rnd.shuffle(shuffled)
    assert read_results(shuffled, members).tasks == read_results(lines, members).tasks


@given(batches(), st.data())
def test_results_do_not_depend_on_lines_read_again(batch, data):
    members, lines, _ = batch
    again = data.draw(st.lists(st.sampled_from(lines), max_size=10)) if lines else []
    mixed = data.draw(st.permutations(lines + again + [json.dumps(x) for x in again]))
    results = read_results(mixed, members)
    assert results.tasks == read_results(lines, members).tasks
    current = [x for x in again if _is_current(x, members)]
    assert results.duplicates == 2 * len(current)  # every copy of a counted line is known as one
    assert results.conflicts == ()


def _is_current(line: dict, members: dict[int, tuple[int, int]]) -> bool:
    task, attempt, _ = parse_custom_id(line["custom_id"])
    return members[task][0] == attempt


@given(batches())
def test_a_task_is_answered_iff_every_chunk_of_its_attempt_has_a_200(batch):
    members, lines, kinds = batch
    results = read_results(lines, members)
    for task, task_kinds in kinds.items():
        state = results.tasks[task].state
        assert (state is State.answered) == all(k == "ok" for k in task_kinds)
        assert (state is State.failed) == any(k in ("500", "400", "expired") for k in task_kinds)


@given(batches())
def test_stale_attempts_never_answer_a_task(batch):
    members, lines, _ = batch
    stale_only = [x for x in lines if not _is_current(x, members)]
    results = read_results(stale_only, members)
    assert all(t.state is State.missing and not t.answers for t in results.tasks.values())
    assert len(results.stale) == len(stale_only)
