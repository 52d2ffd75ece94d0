"""The reviewer's HTTP client: the SDK's aiohttp client, whose ``send`` takes a plain request
straight to its transport (issue 24).

httpx's ``send`` runs every request through its auth flow, its redirect loop, a timing wrapper
around the body stream, the cookie jar and a log line before and after the transport: at
C = 1,024 about 5 % of a worker's loop (py-spy, GIL samples). The SDK's requests use none of them
here: the SDK sets the ``Authorization`` header itself, the client has no httpx auth, event hooks
or proxy mounts, and the chat requests are copies that carry no cookies (``built_once``). So such
a request goes to the transport and its body is read; the transport maps aiohttp's errors to
httpx's as before, and the SDK maps those and the status as before. Anything else (a stream, an
auth, hooks, a proxy, a request without its timeout) goes through httpx's own ``send``, and so does
a redirect (a proxy's 307): the request is sent again that way, which follows it.

A response read takes its turn (``answer_turns``) before the SDK handles it: when a burst of
answers arrives, they are handled a few per loop iteration, in the order they came.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import openai

from docllm.adapters.llm.answer_turns import take_turn

try:  # openai 3 moved to httpx2; earlier versions use httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the openai version installed
    import httpx  # type: ignore[no-redef, import-not-found, unused-ignore]  # which one is installed varies


class LeanAioHttpClient(openai.DefaultAioHttpClient):
    lean_sends = 0  # requests that took the short way (for tests)

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._proxied = bool(self._mounts)  # set once here (proxies from the environment are mounts)

    async def send(self, request: httpx.Request, *, stream: bool = False, **kwargs: Any) -> httpx.Response:
        response = await self._send(request, stream=stream, **kwargs)
        if not stream:  # read: what is left is handling it
            await take_turn()
        return response

    async def _send(self, request: httpx.Request, *, stream: bool, **kwargs: Any) -> httpx.Response:
        # Auth and hooks can be set on the client at any time: looked at per request.
        hooked = any(self.event_hooks.values())
        plain = not (self._proxied or hooked or self.auth is not None or kwargs.get("auth"))
        if stream or not plain or self.is_closed or "timeout" not in request.extensions:
            return await super().send(request, stream=stream, **kwargs)
        started = time.perf_counter()
        response = await self._transport.handle_async_request(request)
        response.request = request
        try:
            if response.has_redirect_location:
                await response.aclose()
                return await super().send(request, stream=stream, **kwargs)
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
        response.elapsed = datetime.timedelta(seconds=time.perf_counter() - started)  # as httpx's send records it
        self.lean_sends += 1
        return response
