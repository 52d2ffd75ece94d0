"""OpenAIReviewer: the DocumentReviewer over any server that speaks the Chat Completions API.

The client never retries (``max_retries=0``): the worker owns retries, bounded and with backoff,
so this adapter only classifies every failure into the domain's error tree.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import openai

from docllm.adapters.llm.provider_hints import bounded, hints_from_headers
from docllm.adapters.llm.provider_hints import retry_after_seconds as _retry_after
from docllm.domain.chunking import Chunk, place_finding, split_markdown
from docllm.domain.errors import ConfigurationError, DocllmError, PermanentError, ProviderUnavailable, TransientError
from docllm.domain.prices import PriceTable
from docllm.domain.prompt import build_messages, repair_messages
from docllm.domain.rate_limits import MAX_COUNT, estimate_tokens
from docllm.domain.report import make_report, merge_reports, parse_answer, require_reviewable
from docllm.domain.services.rate_gate import NoGate, RateGate
from docllm.domain.usage import LlmCall, record

try:  # openai 3 moved to httpx2; earlier versions use httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the openai version installed
    import httpx  # type: ignore[no-redef, import-not-found, unused-ignore]  # which one is installed varies

if TYPE_CHECKING:
    from openai._legacy_response import LegacyAPIResponse
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

log = logging.getLogger(__name__)

POOL_CONNECTIONS = 32  # the most connections one HTTP pool of the reviewer holds


class OpenAIReviewer:
    name = "openai"

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout_seconds: float = 60.0,
        max_chunk_chars: int = 12000,
        max_retries: int = 0,
        max_connections: int = 100,
        gate: RateGate | NoGate | None = None,
        chunk_parallelism: int = 4,
        prices: PriceTable | None = None,
        on_call: Callable[[LlmCall], None] | None = None,
    ):
        if not model:
            raise ConfigurationError("no LLM model is set (DOCLLM_LLM_MODEL)")
        self.model = model
        self._key = api_key or ""
        self._where = re.sub(r"//[^/@]*@", "//", base_url) if base_url else "the OpenAI API"  # no user:password
        self._timeout = timeout_seconds
        self._max_chunk_chars = max_chunk_chars
        self._json_mode = True  # off for good once the server rejects response_format
        self._gate = gate or NoGate()  # the fleet's rate limits, one turn per request
        self._parallelism = max(1, chunk_parallelism)
        self._prices = prices or PriceTable()
        self._on_call = on_call  # each call's usage, for metrics (the attempt's meter gets it anyway)
        # Servers on a laptop often need no key, but the client insists on one. One connection per
        # attempt in flight, in pools of at most POOL_CONNECTIONS: the HTTP pool assigns requests to
        # connections in time that grows with connections x waiting requests, so one pool of a
        # thousand costs more CPU than the requests themselves; several small ones do not.
        shards = max(1, math.ceil(max_connections / POOL_CONNECTIONS))
        per_pool = math.ceil(max_connections / shards)
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        self._clients = [
            openai.AsyncOpenAI(
                base_url=base_url or None,
                api_key=api_key or "unset",
                timeout=timeout_seconds,
                max_retries=max_retries,
                http_client=openai.DefaultAsyncHttpxClient(limits=limits),
            )
            for _ in range(shards)
        ]
        self._turn = itertools.cycle(self._clients)

    @property
    def _client(self) -> openai.AsyncOpenAI:
        """The next pool, in turn."""
        return next(self._turn)

    async def close(self) -> None:
        for client in self._clients:
            await client.close()

    async def check(self) -> None:
        try:
            try:
                await self._client.models.retrieve(self.model)
            except openai.APIStatusError as e:
                if e.status_code not in (404, 405, 501):
                    raise
                # Not every compatible server serves /models/{id}: ask for one token instead.
                await self._client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": "ping"}], max_tokens=1
                )
        except openai.BadRequestError:
            return  # the model exists; the server only disliked the probe's parameters
        except openai.OpenAIError as e:
            raise self._translate(e) from None

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        """Up to ``chunk_parallelism`` chunks at a time, merged in chunk order whatever order they
        end in. The first chunk that fails cancels the others; a cancelled review cancels every
        request in flight, and no chunk not yet sent is sent (I11)."""
        chunks = split_markdown(require_reviewable(document), self._max_chunk_chars)
        if len(chunks) == 1:
            return merge_reports([await self._review_chunk(task_name, chunks[0], 1, 1)])
        turns = asyncio.Semaphore(self._parallelism)

        async def one(part: int, chunk: Chunk) -> dict[str, Any]:
            async with turns:
                return await self._review_chunk(task_name, chunk, part, len(chunks))

        parts: list[asyncio.Task[dict[str, Any]]] = []
        try:
            async with asyncio.TaskGroup() as group:
                parts = [group.create_task(one(i, c)) for i, c in enumerate(chunks, 1)]
        except BaseExceptionGroup:
            # The error of the first failed chunk in document order (the domain's error, not a group).
            for part in parts:
                error = None if part.cancelled() else part.exception()
                if error is not None:
                    raise error from None
            raise
        return merge_reports([p.result() for p in parts])

    async def _review_chunk(self, task_name: str, chunk: Chunk, part: int, parts: int) -> dict[str, Any]:
        messages = build_messages(task_name, chunk.text, chunk.heading, part, parts)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for repairing in (False, True):
            answer = await self._complete(messages, usage)
            try:
                parsed = parse_answer(answer)
                break
            except ValueError as e:
                if repairing:
                    raise TransientError(f"LLM answered an invalid report: {e}") from None
                messages = repair_messages(messages, answer, str(e))
        findings = [place_finding(f, chunk) for f in parsed["findings"]]
        return make_report(findings, parsed["summary"], self.name, self.model, chunks=1, usage=usage)

    async def _complete(self, messages: list[dict[str, str]], usage: dict[str, int]) -> str:
        async with self._gate.request(estimate_tokens(messages)) as ticket:
            try:
                try:
                    raw = await self._create(messages)
                except openai.BadRequestError as e:
                    if not (self._json_mode and _about_response_format(e)):
                        raise
                    log.warning("the LLM at %s rejects response_format; asking for JSON in words only", self._where)
                    self._json_mode = False
                    raw = await self._create(messages)
                response = raw.parse()
            except openai.OpenAIError as e:
                ticket.hints = hints_from_headers(e.response.headers if isinstance(e, openai.APIStatusError) else None)
                raise self._translate(e) from None  # the chained error could carry what the server echoed
            ticket.hints = hints_from_headers(raw.headers)
            reported = _reported_tokens(response)
            if reported:
                ticket.used = sum(reported)
        if reported:
            usage["prompt_tokens"] += reported[0]
            usage["completion_tokens"] += reported[1]
        return (response.choices[0].message.content or "") if response.choices else ""

    async def _create(self, messages: list[dict[str, str]]) -> LegacyAPIResponse[ChatCompletion]:
        """One request, recorded as one LLM call whatever its end (answered, failed, cancelled). The
        raw response: its headers carry the provider's rate-limit hints."""
        started, outcome, response = time.perf_counter(), "error", None
        try:
            raw = await self._request(messages)
            response = raw.parse()
            outcome = "ok"
            return raw
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self._record(outcome, time.perf_counter() - started, response)

    def _record(self, outcome: str, seconds: float, response: ChatCompletion | None) -> None:
        prompt, completion = _reported_tokens(response) or (0, 0)
        cost = self._prices.cost(self.model, prompt, completion)
        call = LlmCall(self.model, outcome, seconds, prompt, completion, cost)
        record(call)
        if self._on_call is not None:
            self._on_call(call)

    async def _request(self, messages: list[dict[str, str]]) -> LegacyAPIResponse[ChatCompletion]:
        sent = cast("list[ChatCompletionMessageParam]", messages)  # the domain's plain role/content dicts
        create = self._client.chat.completions.with_raw_response.create
        if self._json_mode:
            return await create(model=self.model, messages=sent, response_format={"type": "json_object"})
        return await create(model=self.model, messages=sent)

    def _translate(self, e: openai.OpenAIError) -> DocllmError:
        if isinstance(e, openai.APITimeoutError):
            return ProviderUnavailable(f"the LLM at {self._where} did not answer within {self._timeout:g} s")
        if isinstance(e, openai.APIConnectionError):
            return ProviderUnavailable(f"cannot reach the LLM at {self._where}")
        if not isinstance(e, openai.APIStatusError):
            return TransientError(f"LLM client error: {type(e).__name__}")
        status, detail = e.status_code, self._detail(e)
        if status in (401, 403):
            hint = "" if self._key else "; no API key is set (DOCLLM_LLM_API_KEY or OPENAI_API_KEY)"
            return ConfigurationError(f"the LLM at {self._where} refused the credentials ({status}){hint}")
        if status == 429 and e.code == "insufficient_quota":  # billing, not load: waiting will not help
            return ConfigurationError(f"the LLM account at {self._where} has no quota left (429 insufficient_quota)")
        if status == 404:
            return ConfigurationError(f"the LLM at {self._where} does not serve model {self.model!r} (404){detail}")
        if status in (408, 409, 429) or status >= 500:
            return ProviderUnavailable(
                f"the LLM answered {status}{detail}", retry_after=_retry_after(e.response.headers)
            )
        return PermanentError(f"the LLM refused the request ({status}){detail}")

    def _detail(self, e: openai.APIStatusError) -> str:
        text = e.body.get("message") if isinstance(e.body, dict) else e.body
        text = " ".join(str(text or "").split())[:300]
        if self._key:
            text = text.replace(self._key, "***")
        return f": {text}" if text else ""


def _reported_tokens(response: ChatCompletion | None) -> tuple[int, int] | None:
    """The answer's (prompt, completion) tokens; None when it reports none, or any count beyond
    belief (then none is kept: the request's estimate stays charged)."""
    usage = response.usage if response is not None else None
    if not usage:
        return None
    counts = []
    for field in ("prompt_tokens", "completion_tokens", "total_tokens"):
        raw = getattr(usage, field, None) or 0  # the client does not validate what the server sent
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = math.nan
        if bounded(f"usage.{field}", raw, value, MAX_COUNT) is None:
            return None
        counts.append(int(value))
    return counts[0], counts[1]


def _about_response_format(e: openai.BadRequestError) -> bool:
    return e.param == "response_format" or "response_format" in str(e.body or e.message)
