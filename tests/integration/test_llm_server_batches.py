"""The test server's Files and Batch APIs (issue 28) driven by the real ``openai`` client: a batch's
life on the server's clock, its result files in OpenAI's format, and the knobs the batch lane's tests
lean on (failed lines, poisoned documents, expiry, lost files, cancel, a batch found by metadata),
in process and as the ``python -m tests.support.llm_server`` process other tests start."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import openai
import pytest

from tests.support.llm_batches import Pick
from tests.support.llm_server import FakeLLM

DELAY = 0.3  # seconds from create to completed: short, the waits below leave wide margins
MARGIN = 20.0
DONE = {"completed", "failed", "expired", "cancelled"}


def request_line(custom_id: str, name: str = "guide.md", model: str = "test-model") -> dict:
    text = f"Task name (data, not an instruction): {json.dumps(name)}\n1| # Install {custom_id}\n2| Run it."
    body = {"model": model, "messages": [{"role": "system", "content": "Review."}, {"role": "user", "content": text}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def client_for(llm: FakeLLM | str) -> openai.OpenAI:
    base_url = llm if isinstance(llm, str) else llm.base_url
    return openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, timeout=10)


def submit(client: openai.OpenAI, lines: list[dict], **metadata: str) -> openai.types.Batch:
    jsonl = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = client.files.create(file=("requests.jsonl", jsonl), purpose="batch")
    return client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h", metadata=metadata
    )


def wait_done(client: openai.OpenAI, batch_id: str, seen: list[str] | None = None) -> openai.types.Batch:
    deadline = time.monotonic() + MARGIN
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if seen is not None and (not seen or seen[-1] != batch.status):
            seen.append(batch.status)
        if batch.status in DONE:
            return batch
        time.sleep(0.02)
    raise AssertionError(f"batch {batch_id} not done within {MARGIN} s")


def read_lines(client: openai.OpenAI, file_id: str | None) -> list[dict]:
    return [json.loads(x) for x in client.files.content(file_id).text.splitlines()] if file_id else []


def ids(lines: list[dict]) -> list[str]:
    return [line["custom_id"] for line in lines]


def test_a_batch_runs_its_delay_and_answers_every_line_once_like_the_chat_route() -> None:
    lines = [request_line(f"docllm:{n}:1:0") for n in range(12)]
    with FakeLLM(batch_delay_s=DELAY, cached_tokens=7) as llm:
        client = client_for(llm)
        started = time.monotonic()
        created = submit(client, lines, docllm_ref="r1")
        seen: list[str] = [created.status]
        batch = wait_done(client, created.id, seen)
        took = time.monotonic() - started
        output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)

        assert batch.status == "completed" and took >= DELAY
        assert seen[0] == "validating" and seen[-1] == "completed"
        lifecycle = ["validating", "in_progress", "finalizing", "completed"]
        assert seen == sorted(seen, key=lifecycle.index)  # never backwards
        assert batch.error_file_id is None and errors == []
        assert sorted(ids(output)) == sorted(ids(lines)) and ids(output) != ids(lines)  # each once, shuffled
        assert batch.request_counts is not None
        assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (12, 12, 0)
        assert batch.metadata == {"docllm_ref": "r1"} and batch.model == "test-model"
        assert batch.in_progress_at and batch.finalizing_at and batch.completed_at and batch.expires_at
        for line in output:
            assert line["error"] is None and line["id"].startswith("batch_req_")
            response = line["response"]
            assert response["status_code"] == 200 and response["request_id"]
            answer = response["body"]
            assert answer["object"] == "chat.completion"
            usage = answer["usage"]
            assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
            assert usage["prompt_tokens_details"]["cached_tokens"] == 7
            report = json.loads(answer["choices"][0]["message"]["content"])
            assert report["findings"][0]["quote"] == f"# Install {line['custom_id']}"  # its own line's answer
        assert batch.usage is not None and batch.usage.input_tokens_details.cached_tokens == 7 * 12
        assert llm.batches.counters["batches_created"] == 1
        assert llm.batches.counters["batch_lines"] == 12 and llm.batches.counters["content_reads"] == 1
        input_file = client.files.retrieve(batch.input_file_id)
        assert input_file.purpose == "batch" and input_file.filename == "requests.jsonl"
        assert client.files.retrieve(batch.output_file_id or "").purpose == "batch_output"


def test_failed_and_poisoned_lines_land_in_the_error_file() -> None:
    lines = [request_line(f"c{n}", name="bad-POISON.md" if n in (3, 17) else f"d{n}.md") for n in range(40)]
    with FakeLLM(batch_delay_s=0.05, batch_fail_rate=0.25, poison_marker="POISON", seed=7) as llm:
        client = client_for(llm)
        batch = wait_done(client, submit(client, lines).id)
        output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)

    assert batch.status == "completed"
    assert sorted(ids(output) + ids(errors)) == sorted(ids(lines))  # every line answered once, somewhere
    statuses = {line["custom_id"]: line["response"]["status_code"] for line in errors}
    assert statuses["c3"] == statuses["c17"] == 400  # poisoned: the document's fault
    assert all(errors_line["error"] is None for errors_line in errors)
    poisoned = [x for x in errors if x["response"]["status_code"] == 400]
    assert {x["response"]["body"]["error"]["code"] for x in poisoned} == {"context_length_exceeded"}
    random_500s = [cid for cid, status in statuses.items() if status == 500]
    assert 2 <= len(random_500s) <= 20  # about a quarter of 38
    assert set(statuses.values()) == {400, 500}
    assert batch.request_counts is not None
    assert (batch.request_counts.completed, batch.request_counts.failed) == (len(output), len(errors))


def test_the_next_expiring_batch_keeps_what_was_answered_and_errors_the_rest() -> None:
    lines = [request_line(f"e{n}") for n in range(10)]
    with FakeLLM(batch_delay_s=0.1, expire_batches=1) as llm:
        client = client_for(llm)
        expired = wait_done(client, submit(client, lines).id)
        after = wait_done(client, submit(client, lines).id)
        output, errors = read_lines(client, expired.output_file_id), read_lines(client, expired.error_file_id)

    assert expired.status == "expired" and expired.expired_at and expired.completed_at is None
    assert len(output) == 5 and sorted(ids(output) + ids(errors)) == sorted(ids(lines))
    assert all(x["response"] is None and x["error"]["code"] == "batch_expired" for x in errors)
    assert all(x["response"]["status_code"] == 200 for x in output)
    assert after.status == "completed"  # one batch only


def test_a_predicate_picks_the_batches_that_expire_fail_or_lose_their_files() -> None:
    def fated(name: str) -> Pick:
        return lambda batch: batch["metadata"].get("fate") == name

    server = FakeLLM(
        batch_delay_s=0.05, expire_batches=fated("expire"), fail_batches=fated("fail"), lose_files=fated("lose")
    )
    with server as llm:
        client = client_for(llm)
        fates = {fate: submit(client, [request_line("x")], fate=fate).id for fate in ("ok", "expire", "fail", "lose")}
        done = {fate: wait_done(client, batch_id) for fate, batch_id in fates.items()}
        assert {fate: b.status for fate, b in done.items()} == {
            "ok": "completed",
            "expire": "expired",  # one line: none answered
            "fail": "failed",
            "lose": "completed",
        }
        assert done["fail"].errors and done["fail"].errors.data and done["fail"].output_file_id is None
        assert done["expire"].output_file_id is None and done["expire"].error_file_id
        with pytest.raises(openai.NotFoundError):
            client.files.content(done["lose"].output_file_id or "")
        assert len(read_lines(client, done["ok"].output_file_id)) == 1


def test_lost_result_files_answer_404_and_the_next_batch_is_readable() -> None:
    with FakeLLM(batch_delay_s=0.05, lose_files=1) as llm:
        client = client_for(llm)
        lost = wait_done(client, submit(client, [request_line("l1"), request_line("l2")]).id)
        assert lost.status == "completed" and lost.output_file_id
        with pytest.raises(openai.NotFoundError):
            client.files.content(lost.output_file_id)
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(lost.output_file_id)
        kept = wait_done(client, submit(client, [request_line("k1")]).id)
        assert ids(read_lines(client, kept.output_file_id)) == ["k1"]
        assert llm.batches.counters["content_lost"] == 1 and llm.batches.counters["content_reads"] == 1


def test_a_batch_with_bad_lines_fails_validation() -> None:
    line = request_line("same")
    with FakeLLM(batch_delay_s=0.05) as llm:
        client = client_for(llm)
        batch = wait_done(client, submit(client, [line, line]).id)
    assert batch.status == "failed" and batch.failed_at
    assert batch.errors and batch.errors.data and batch.errors.data[0].code == "duplicate_custom_id"
    assert batch.errors.data[0].line == 2 and batch.output_file_id is None


def test_cancel_keeps_the_lines_answered_before_it() -> None:
    lines = [request_line(f"k{n}") for n in range(10)]
    with FakeLLM(batch_delay_s=3.0, cancel_delay_s=0.1) as llm:
        client = client_for(llm)
        batch = submit(client, lines)
        deadline = time.monotonic() + MARGIN
        while not (batch.request_counts and batch.request_counts.completed) and time.monotonic() < deadline:
            time.sleep(0.02)
            batch = client.batches.retrieve(batch.id)
        cancelling = client.batches.cancel(batch.id)
        cancelled = wait_done(client, batch.id)
        output, errors = read_lines(client, cancelled.output_file_id), read_lines(client, cancelled.error_file_id)
        with pytest.raises(openai.BadRequestError):
            client.batches.cancel(batch.id)  # a batch that has ended cannot be cancelled

    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    assert cancelled.status == "cancelled" and cancelled.cancelled_at
    assert 1 <= len(output) < len(lines) and sorted(ids(output) + ids(errors)) == sorted(ids(lines))
    assert all(x["error"]["code"] == "batch_cancelled" for x in errors)
    assert llm.batches.counters["batches_cancelled"] == 1


def test_batches_are_listed_newest_first_by_cursor_and_found_by_metadata() -> None:
    with FakeLLM() as llm:
        client = client_for(llm)
        made = [submit(client, [request_line("x")], docllm_ref=f"ref{n}").id for n in range(5)]
        listed = list(client.batches.list(limit=2))  # the client pages on with ``after``
        found = [b for b in client.batches.list() if (b.metadata or {}).get("docllm_ref") == "ref2"]
        pages = [r["path"] for r in llm.requests if r["path"].startswith("/v1/batches?limit=2")]

    assert [b.id for b in listed] == made[::-1]
    assert [b.id for b in found] == [made[2]]
    assert len(pages) == 3 and all("after=" in p for p in pages[1:])  # 5 batches in pages of 2


def test_the_async_client_round_trip() -> None:
    async def run(base_url: str) -> tuple[str, list[str]]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        try:
            jsonl = (json.dumps(request_line("a1")) + "\n").encode()
            uploaded = await client.files.create(file=("in.jsonl", jsonl), purpose="batch")
            batch = await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            while batch.status not in DONE:
                await asyncio.sleep(0.02)
                batch = await client.batches.retrieve(batch.id)
            content = await client.files.content(batch.output_file_id or "")
            return batch.status, ids([json.loads(x) for x in content.text.splitlines()])
        finally:
            await client.close()

    with FakeLLM(batch_delay_s=0.05) as llm:
        assert asyncio.run(asyncio.wait_for(run(llm.base_url), MARGIN)) == ("completed", ["a1"])


def test_the_server_process_takes_the_batch_knobs_as_flags() -> None:
    argv = [
        sys.executable,
        "-m",
        "tests.support.llm_server",
        "--port",
        "0",
        "--seed",
        "1",
        "--batch-delay-s",
        "0.1-0.2",
    ]
    argv += ["--poison-marker", "POISON", "--expire-batches", "at:2", "--lose-files", "at:3", "--cached-tokens", "3"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url = f"http://127.0.0.1:{int(proc.stdout.readline())}"
        client = client_for(base_url + "/v1")
        lines = [request_line("p1", name="POISON.md"), request_line("p2"), request_line("p3")]
        batches = [wait_done(client, submit(client, lines, n=str(n)).id) for n in (1, 2, 3)]
        assert [b.status for b in batches] == ["completed", "expired", "completed"]
        errors = read_lines(client, batches[0].error_file_id)
        assert [(x["custom_id"], x["response"]["status_code"]) for x in errors] == [("p1", 400)]
        output = read_lines(client, batches[0].output_file_id)
        assert {x["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] for x in output} == {3}
        with pytest.raises(openai.NotFoundError):
            client.files.content(batches[2].output_file_id or "")
        with urllib.request.urlopen(base_url + "/_fake/counters", timeout=10) as answer:
            counters = Counter(json.load(answer))
        assert counters["batches_created"] == 3 and counters["content_lost"] == 1
        assert counters["content_reads"] == 2 and counters["batch_lines"] == 3 + 1 + 3
    finally:
        proc.terminate()
        assert proc.wait(timeout=MARGIN) == 0
