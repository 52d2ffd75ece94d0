"""``BuiltOnceClient``: a request like the last one is a copy of it with its own body, and the copy
is what the SDK would have built (a new per-request header in a later SDK fails the comparison)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import orjson
import pytest
from openai._models import FinalRequestOptions

from docllm.adapters.llm.built_once import BuiltOnceClient
from docllm.adapters.llm.clients import client_options

CHAT = FinalRequestOptions.construct(method="post", url="/chat/completions")


def _options(client: openai.AsyncOpenAI, body: dict[str, Any], **more: Any) -> FinalRequestOptions:
    """The options as the SDK's ``request`` hands them to ``_build_request``."""
    key = client._idempotency_key()
    options = CHAT.model_copy(update={"content": orjson.dumps(body), "idempotency_key": key, **more})
    return asyncio.run(client._prepare_options(options))


def _seen(request: Any) -> tuple[Any, ...]:
    return request.method, str(request.url), request.headers.multi_items(), request.extensions, request.content


@pytest.fixture
def clients():
    kw = client_options("http://127.0.0.1:9/v1", "sk-test", 30.0)
    return BuiltOnceClient(**kw), openai.AsyncOpenAI(**kw)


def test_the_next_chat_request_is_a_copy_with_its_own_body_equal_to_the_sdks(clients, monkeypatch):
    ours, sdk = clients
    built = []
    build = openai.AsyncOpenAI._build_request
    monkeypatch.setattr(openai.AsyncOpenAI, "_build_request", lambda *a, **k: built.append(1) or build(*a, **k))
    ours._build_request(_options(ours, {"messages": ["first"]}))
    assert len(built) == 1
    for body in ({"messages": ["second, longer than the first"]}, {"messages": []}):
        copy = ours._build_request(_options(ours, body))
        built.clear()
        expected = sdk._build_request(_options(sdk, body))
        assert _seen(copy) == _seen(expected)
        assert copy.headers["content-length"] == str(len(orjson.dumps(body)))
    assert len(built) == 1, "only the SDK's own client built a request"


def test_a_request_unlike_the_last_is_built_by_the_sdk(clients, monkeypatch):
    ours, sdk = clients
    ours._build_request(_options(ours, {"a": 1}))
    other = {"headers": {"X-Other": "1"}, "timeout": 5.0}
    for update in ({"url": "/models/m"}, other):
        assert _seen(ours._build_request(_options(ours, {"a": 1}, **update))) == _seen(
            sdk._build_request(_options(sdk, {"a": 1}, **update))
        )
    ours.api_key = "sk-rotated"  # a key that changed is sent, not the copied header
    request = ours._build_request(_options(ours, {"a": 1}))
    assert request.headers["authorization"] == "Bearer sk-rotated"


def test_openai_sends_no_idempotency_header():
    """Were the SDK to send one, a copy would send the first request's key again."""
    assert BuiltOnceClient(**client_options(None, "k", 1.0))._idempotency_header is None
