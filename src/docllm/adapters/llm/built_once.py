"""An ``AsyncOpenAI`` that builds a request like the last one by copying it (issue 24).

The SDK builds every request from nothing: it merges and validates the headers (decoding and
lower-casing each), parses the URL, and makes httpx's ``Request``. At C = 1,024 that was 17 % of a
worker's loop (py-spy, GIL samples). docllm's chat requests differ only in their body, so the SDK
builds the first and the next are copies of it with their own body: the same method, URL, headers
and timeout. A request whose options differ from the last one's in anything but the body (another
path, per-call headers or timeout, a retry's count), or a client whose key can change, is built by
the SDK as before; everything after the build (auth, sending, errors) is the SDK's, unchanged.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import openai
from openai._models import FinalRequestOptions

try:  # openai 3 moved to httpx2; earlier versions use httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the openai version installed
    import httpx  # type: ignore[no-redef, import-not-found, unused-ignore]  # which one is installed varies

# What differs between two chat requests built alike: the body, and the key the SDK draws per
# request for an idempotency header (OpenAI's client sends none: checked below).
PER_REQUEST = frozenset({"content", "idempotency_key"})


class _Built(NamedTuple):
    """The last request the SDK built, and what it was built from."""

    fields: dict[str, Any]  # its options but ``PER_REQUEST``
    base_url: Any
    api_key: str
    request: httpx.Request
    headers: httpx.Headers  # its headers but Content-Length (the copy's is its body's)


class BuiltOnceClient(openai.AsyncOpenAI):
    @property
    def user_agent(self) -> str:
        """The SDK's own (it names the client's class): a provider sees the same client as before."""
        return openai.AsyncOpenAI.user_agent.fget(self).replace(type(self).__name__, "AsyncOpenAI", 1)  # type: ignore[attr-defined]

    _last: _Built | None = None

    def _build_request(self, options: FinalRequestOptions, *, retries_taken: int = 0) -> httpx.Request:
        if retries_taken or self._idempotency_header or not isinstance(self.api_key, str):
            return super()._build_request(options, retries_taken=retries_taken)
        fields = {k: v for k, v in options.__dict__.items() if k not in PER_REQUEST}
        last = self._last
        if last is None or last.fields != fields or last.base_url is not self._base_url or last.api_key != self.api_key:
            request = super()._build_request(options, retries_taken=retries_taken)
            headers = httpx.Headers([(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"])
            self._last = _Built(fields, self._base_url, self.api_key, request, headers)
            return request
        model, body = last.request, cast(Any, options.content)  # bytes: the body as sent
        # Given as a stream with every header set (the first request's Host among them), httpx
        # takes the headers as they are: with ``content`` it would normalise them all again
        # (30 us a request, 5 this way). ``read`` loads the body, as ``content`` would.
        headers = httpx.Headers(last.headers)  # a copy: the list is copied, not re-parsed
        headers["Content-Length"] = str(len(body))
        request = httpx.Request(
            model.method, model.url, headers=headers, stream=httpx.ByteStream(body), extensions=model.extensions
        )
        request.read()
        return request
