"""The reviewer's HTTP client (``lean_http.LeanAioHttpClient``) with the real openai client over
HTTP: a plain request goes straight to the transport and reads alike; a redirect, an event hook or
a proxy takes httpx's own ``send``, as before."""

from __future__ import annotations

import asyncio
from typing import Any

from docllm.adapters.llm.lean_http import LeanAioHttpClient
from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from tests.support.llm_server import FakeLLM, Reply

DOC = "# Install guide\n\nRun the installer.\n"


def lean_sends(reviewer: OpenAIReviewer) -> int:
    return sum(client._client.lean_sends for client in reviewer._clients)  # type: ignore[attr-defined]


def kept(reviewer: OpenAIReviewer) -> list[Any]:
    """Every HTTP response the reviewer's requests get, in order."""
    responses: list[Any] = []
    request = reviewer._request

    async def keeping(*args: Any) -> Any:
        responses.append(await request(*args))
        return responses[-1]

    reviewer._request = keeping  # type: ignore[method-assign, assignment]
    return responses


def review(reviewer: OpenAIReviewer) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        try:
            return await reviewer.review("guide", DOC)
        finally:
            await reviewer.close()

    return asyncio.run(run())


def test_a_chat_request_goes_straight_to_the_transport_and_reads_as_through_httpx():
    with FakeLLM() as llm:
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", timeout_seconds=5.0)
        responses = kept(reviewer)
        report = review(reviewer)
        assert lean_sends(reviewer) == 1
        assert 0 < responses[-1].elapsed.total_seconds() < 5.0  # recorded as httpx's send records it
        assert responses[-1].is_closed and responses[-1].json()["usage"]["prompt_tokens"] > 0
        assert report["findings"][0]["location"]["heading"] == "Install guide"
        assert report["usage"]["prompt_tokens"] > 0
        sent = llm.requests[-1]
        assert sent["headers"]["authorization"] == "Bearer sk-test"
        assert sent["body"]["model"] == "test-model" and sent["body"]["messages"]


def test_a_redirect_is_sent_again_through_httpx_which_follows_it():
    with FakeLLM() as llm:
        llm.script(Reply(status=307, body="", headers={"Location": f"{llm.base_url}/chat/completions"}))
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", timeout_seconds=5.0)
        report = review(reviewer)
        assert report["findings"], report
        assert lean_sends(reviewer) == 0
        chats = [r for r in llm.requests if r["path"].endswith("/chat/completions")]
        assert len(chats) == 2  # the one answered 307, then the same request through httpx


def test_a_client_with_an_event_hook_an_auth_or_a_proxy_sends_through_httpx():
    seen: list[str] = []

    async def hook(request: Any) -> None:
        seen.append(str(request.url))

    with FakeLLM() as llm:
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", timeout_seconds=5.0)
        for client in reviewer._clients:
            client._client.event_hooks = {"request": [hook], "response": []}
        assert review(reviewer)["findings"]
        assert lean_sends(reviewer) == 0 and len(seen) == 1
    with FakeLLM() as llm:
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", timeout_seconds=5.0)
        for client in reviewer._clients:
            client._client.auth = ("user", "set after the client was built")
        assert review(reviewer)["findings"]
        assert lean_sends(reviewer) == 0
    proxied = LeanAioHttpClient(proxy="http://127.0.0.1:9")
    assert proxied._proxied is True
