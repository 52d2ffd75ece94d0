"""OpenAIReviewer's lean request path (issue 24) over HTTP: the SDK's aiohttp transport, the body
sent as a plain dict, the raw answer decoded once. What a malformed answer does, that the
transport keeps the timeout and the connection cap, and how it reports a connection that fails."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import fakeredis
import pytest

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.redis.rate_limiter import RedisRateLimiter
from docllm.domain.errors import ProviderUnavailable, TransientError
from docllm.domain.llm.rate_gate import RateGate
from docllm.domain.llm.usage import LlmCall
from docllm.domain.review.report import validate_report
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, Reply, completion

DOC = "# Install guide\n\nRun the installer.\n"
REPORT = json.dumps({"findings": [], "summary": "Fine."})


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


def review(reviewer: OpenAIReviewer, document: str = DOC) -> dict:
    async def run() -> dict:
        try:
            return await reviewer.review("install", document)
        finally:
            await reviewer.close()

    return asyncio.run(run())


def make(base_url: str, timeout: float = 2.0, **kw) -> tuple[OpenAIReviewer, list[LlmCall]]:
    calls: list[LlmCall] = []
    return OpenAIReviewer(base_url, "sk-test", "test-model", timeout, on_call=calls.append, **kw), calls


def test_the_request_body_is_the_plain_chat_completion(llm):
    reviewer, _ = make(llm.base_url)
    review(reviewer)
    [request] = llm.requests
    assert (request["method"], request["path"]) == ("POST", "/v1/chat/completions")
    assert request["headers"]["content-type"] == "application/json"
    assert set(request["body"]) == {"model", "messages", "response_format"}
    assert [m["role"] for m in request["body"]["messages"]] == ["system", "user"]


@pytest.mark.parametrize("body", ["<html>Bad gateway</html>", "", [], "null", '"just a string"'])
def test_an_answer_that_is_not_a_json_object_is_retryable_and_recorded_as_an_error(llm, body):
    llm.script(Reply(body=body))
    reviewer, calls = make(llm.base_url)
    with pytest.raises(TransientError, match="not a chat completion"):
        review(reviewer)
    assert len(llm.requests) == 1  # not repaired: there is no answer to repair
    assert [(c.outcome, c.prompt_tokens, c.completion_tokens) for c in calls] == [("error", 0, 0)]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"choices": []},
        {"choices": "all of them"},
        {"choices": [None]},
        {"choices": [{"message": "hello"}]},
        {"choices": [{"message": {"content": None}}]},
        {"choices": [{"message": {"content": 7}}]},
    ],
)
def test_an_object_without_a_message_text_is_an_empty_answer_that_gets_a_repair(llm, body):
    llm.script(Reply(body=body))  # then the smart default answers the repair
    reviewer, calls = make(llm.base_url)
    report = review(reviewer)
    assert validate_report(report) == report
    assert len(llm.requests) == 2
    assert [c.outcome for c in calls] == ["ok", "ok"]


@pytest.mark.parametrize(
    "usage",
    [
        "lots",
        ["prompt_tokens", 3],
        {"prompt_tokens": "many", "completion_tokens": 2, "total_tokens": 5},
        {"prompt_tokens": -3, "completion_tokens": 2, "total_tokens": 5},
    ],
)
def test_usage_the_server_garbled_is_not_counted(llm, usage):
    llm.script(Reply(body={**completion(REPORT), "usage": usage}))
    reviewer, calls = make(llm.base_url)
    report = review(reviewer)
    assert report["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
    assert [(c.outcome, c.prompt_tokens, c.completion_tokens) for c in calls] == [("ok", 0, 0)]


def test_the_usage_the_server_reports_is_counted(llm):
    llm.script(Reply(body=completion(REPORT, prompt_tokens=41, completion_tokens=7)))
    reviewer, calls = make(llm.base_url)
    assert review(reviewer)["usage"] == {"prompt_tokens": 41, "completion_tokens": 7}
    assert [(c.prompt_tokens, c.completion_tokens) for c in calls] == [(41, 7)]


def test_the_rate_limit_headers_of_a_malformed_answer_still_reach_the_fleets_limiter(llm):
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    clock = ManualClock()  # time stands still: the waits the headers set are read back as set
    mine, other = (RedisRateLimiter(client, "{q}", clock, llm.base_url, "test-model", rpm=1000) for _ in range(2))
    llm.script(Reply(body="oops", headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s"}))
    reviewer, _ = make(llm.base_url, gate=RateGate(mine))
    with pytest.raises(TransientError):
        review(reviewer)
    view = other.headroom()
    assert (view["provider_remaining_requests"], round(view["provider_reset_s"])) == (0, 30)


def test_requests_in_flight_never_exceed_the_connection_cap(llm):
    llm.script(*[Reply(delay=0.2)] * 6)
    reviewer, _ = make(llm.base_url, max_connections=2)

    async def six() -> None:
        try:
            await asyncio.gather(*(reviewer.review(f"t{i}", DOC) for i in range(6)))
        finally:
            await reviewer.close()

    asyncio.run(six())
    assert len(llm.requests) == 6
    assert llm.max_in_flight == 2


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_a_server_that_accepts_and_never_answers_times_out_at_the_timeout(silent_port):
    reviewer, calls = make(f"http://127.0.0.1:{silent_port}/v1", timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="did not answer within 0.3 s"):
        review(reviewer)
    assert 0.25 < time.monotonic() - started < 5  # the timeout, not the socket's or the pool's
    assert [c.outcome for c in calls] == ["error"]


@pytest.fixture
def hanging_up_port() -> Iterator[int]:
    """A port whose server reads the request, then closes the connection without an answer."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


def test_a_server_that_hangs_up_is_unreachable_not_slow(hanging_up_port):
    reviewer, calls = make(f"http://127.0.0.1:{hanging_up_port}/v1", timeout=30.0)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="cannot reach"):
        review(reviewer)
    assert time.monotonic() - started < 5  # at the hang-up, not at the timeout
    assert [c.outcome for c in calls] == ["error"]
