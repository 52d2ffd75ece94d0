"""OpenAIReviewer: the DocumentReviewer over any server that speaks the Chat Completions API.

The client never retries (``max_retries=0``): the worker owns retries, bounded and with backoff,
so this adapter only classifies every failure into the domain's error tree.

The request path is the lean one through the ``openai`` package (issue 24; figures in
docs/BENCHMARKS.md, "The reviewer's request path"): the SDK's aiohttp transport
(``openai[aiohttp]``) instead of httpx's connection pool; the body a plain dict encoded once,
sent with the client's ``request`` and options built once per reviewer (no typed-parameter
transform); the answer the raw response decoded once, ``usage`` and the message read from the
dict (no pydantic model); a chat request a copy of the last one with its body
(``built_once.BuiltOnceClient``). The SDK still applies the timeout, sends the credentials and
raises its error types, which ``_translate`` maps as before.

The answer's form is asked for as strictly as the server allows (``RUNGS``): the domain's answer
schema as a strict ``json_schema``, else ``json_object``, else the prompt's words; every answer is
checked against that one schema whatever was asked (``report.parse_answer``). The body, the reading
of an answer and the meaning of an error status are the domain's (``domain/review/chat.py``), shared with
the Batch API's lines.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import openai
import orjson
from openai._models import FinalRequestOptions

from docllm.adapters.llm.built_once import BuiltOnceClient
from docllm.adapters.llm.chunked import review_chunks
from docllm.adapters.llm.clients import client_options, translate, where_of
from docllm.adapters.llm.lean_http import LeanAioHttpClient
from docllm.adapters.llm.provider_hints import bounded, hints_from_headers
from docllm.domain.errors import ConfigurationError, DocllmError, TransientError
from docllm.domain.llm.prices import PriceTable
from docllm.domain.llm.rate_gate import NoGate, RateGate
from docllm.domain.llm.rate_limits import estimate_tokens
from docllm.domain.llm.usage import LlmCall, record
from docllm.domain.review.chat import (
    RUNGS,
    about_response_format,
    chat_body,
    chunk_report,
    content,
    reported_tokens,
)
from docllm.domain.review.chunking import Chunk, split_markdown
from docllm.domain.review.prompt import build_messages, repair_messages
from docllm.domain.review.report import merge_reports, parse_answer, require_reviewable
from docllm.domain.review.rubric import Rubric
from docllm.domain.tracing import current, traced

try:  # openai 3 moved to httpx2; earlier versions use httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the openai version installed
    import httpx  # type: ignore[no-redef, import-not-found, unused-ignore]  # which one is installed varies

log = logging.getLogger(__name__)

POOL_CONNECTIONS = 32  # the most connections one HTTP pool of the reviewer holds


class OpenAIReviewer:
    name = "openai"
    client_class: type[openai.AsyncOpenAI] = BuiltOnceClient  # the bench swaps in the SDK's own

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
        deployment: str | None = None,
        spent_at: str | None = None,
    ):
        if not model:
            raise ConfigurationError("no LLM model is set (DOCLLM_LLM_MODEL)")
        self.model = model
        self.deployment = deployment  # its name in DOCLLM_LLM_DEPLOYMENTS, recorded per chunk; None: not routed
        # The deployment its calls' spend is counted under (the lone one too: "default" for the
        # single-URL settings); None: not counted per deployment.
        self._spent_at = spent_at or deployment
        self._key = api_key or ""
        self._where = where_of(base_url)
        self._timeout = timeout_seconds
        self._max_chunk_chars = max_chunk_chars
        self._rung = 0  # index in RUNGS; only goes down, once per refusal, for this server for good
        self._gate = gate or NoGate()  # the fleet's rate limits, one turn per request
        self._parallelism = max(1, chunk_parallelism)
        self._prices = prices or PriceTable()
        self._on_call = on_call  # each call's usage, for metrics (the attempt's meter gets it anyway)
        # One connection per attempt in flight, in pools of at most POOL_CONNECTIONS: the HTTP pool assigns requests to
        # connections in time that grows with connections x waiting requests, so one pool of a
        # thousand costs more CPU than the requests themselves; several small ones do not.
        shards = max(1, math.ceil(max_connections / POOL_CONNECTIONS))
        per_pool = math.ceil(max_connections / shards)
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        # One TLS context for every pool, made as each pool would make its own: loading the
        # trusted certificates costs ~30 ms of CPU a context (a second at C = 1,024 otherwise).
        tls = httpx.create_ssl_context()
        self._clients = [
            self.client_class(
                **client_options(base_url, api_key, timeout_seconds, max_retries),
                http_client=self._http_client(limits, tls),
            )
            for _ in range(shards)
        ]
        self._turn = itertools.cycle(self._clients)
        # A chat request's span attributes (OpenTelemetry GenAI conventions), built once.
        self._span_attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": model,
        }
        # Every chat request's options but its body, built once: each request is a copy with the body.
        self._chat = FinalRequestOptions.construct(method="post", url="/chat/completions")

    @staticmethod
    def _http_client(limits: httpx.Limits, tls: Any = True) -> httpx.AsyncClient:
        """One pool: the SDK's aiohttp transport (its connector holds at most ``limits.max_connections``),
        a plain request sent straight to it (``lean_http``)."""
        return LeanAioHttpClient(limits=limits, verify=tls)

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

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        """Chunk by chunk (``chunked.review_chunks``: bounded parallelism, I11), merged in chunk order.
        What it may cost was reserved before (the spend ledger, I16: ``TaskProcessor.reserve``)."""
        chunks = split_markdown(require_reviewable(document), self._max_chunk_chars)

        async def one(chunk: Chunk, part: int, parts: int) -> dict[str, Any]:
            return await self.review_chunk(task_name, chunk, part, parts, rubric)

        return merge_reports(await review_chunks(chunks, self._parallelism, one))

    async def review_chunk(
        self,
        task_name: str,
        chunk: Chunk,
        part: int,
        parts: int,
        rubric: Rubric | None = None,
        max_wait: float | None = None,
    ) -> dict[str, Any]:
        """One chunk's report (a routed review sends each chunk to one deployment's reviewer).
        ``max_wait``: OverBudget instead of waiting longer than that for the first request's turn."""
        with traced("docllm.chunk", {"docllm.chunk.part": part, "docllm.chunk.parts": parts}):
            return await self._review_one(task_name, chunk, part, parts, rubric, max_wait)

    async def _review_one(
        self, task_name: str, chunk: Chunk, part: int, parts: int, rubric: Rubric | None, max_wait: float | None
    ) -> dict[str, Any]:
        messages = build_messages(task_name, chunk.text, chunk.heading, part, parts, rubric)
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for repairing in (False, True):
            answer = await self._complete(messages, usage, None if repairing else max_wait)
            try:
                parsed = parse_answer(answer)
                break
            except ValueError as e:
                if repairing:
                    raise TransientError(f"LLM answered an invalid report: {e}") from None
                messages = repair_messages(messages, answer, str(e))
        return chunk_report(parsed, chunk, self.model, usage, self.deployment)

    async def _complete(
        self, messages: list[dict[str, str]], usage: dict[str, int], max_wait: float | None = None
    ) -> str:
        async with self._gate.request(estimate_tokens(messages), max_wait) as ticket:
            rung = self._rung
            try:
                while True:
                    try:
                        raw, body = await self._create(messages, RUNGS[rung])
                        break
                    except openai.BadRequestError as e:
                        if RUNGS[rung] is None or not _about_response_format(e):
                            raise
                        rung = self._step_down(rung)  # always a lower rung: the loop ends by the last
            except openai.OpenAIError as e:
                ticket.hints = hints_from_headers(e.response.headers if isinstance(e, openai.APIStatusError) else None)
                raise self._translate(e) from None  # the chained error could carry what the server echoed
            ticket.hints = hints_from_headers(raw.headers)
            if body is None:
                raise TransientError(f"the LLM at {self._where} answered a body that is not a chat completion")
            reported = _reported_tokens(body)
            if reported:
                ticket.used = reported[0] + reported[1]
        if reported:
            usage["prompt_tokens"] += reported[0]
            usage["completion_tokens"] += reported[1]
        return content(body)

    def _step_down(self, refused: int) -> int:
        """The rung below the one the server refused, remembered. Chunks in flight at once may each
        be refused the same rung: the first moves the reviewer down, the others find it there."""
        if self._rung <= refused:
            self._rung = refused + 1
            asked = "JSON in words only" if RUNGS[self._rung] is None else "any JSON object"
            log.warning("the LLM at %s refuses response_format %s; asking for %s", self._where, _kind(refused), asked)
        return self._rung

    async def _create(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None
    ) -> tuple[httpx.Response, dict[str, Any] | None]:
        """One request, recorded as one LLM call whatever its end (answered, failed, cancelled): the
        raw response (its headers carry the provider's rate-limit hints) and its body decoded, None
        when that is not a JSON object."""
        started, outcome, body, error = time.perf_counter(), "error", None, None
        span = current().child(f"chat {self.model}", self._span_attributes)  # no-op when tracing is off
        try:
            raw = await self._request(messages, response_format)
            body = self._decode(raw)
            if body is not None:
                outcome = "ok"
            return raw, body
        except BaseException as e:
            outcome, error = "cancelled" if isinstance(e, asyncio.CancelledError) else outcome, e
            raise
        finally:
            call = self._record(outcome, time.perf_counter() - started, body)
            if span.recording:
                span.set(gen_ai_answer(body, call))
            span.end(error)

    def _record(self, outcome: str, seconds: float, body: dict[str, Any] | None) -> LlmCall:
        prompt, completion, cached = _reported_tokens(body) or (0, 0, 0)
        cost = self._prices.cost(self.model, prompt, completion, cached)
        call = LlmCall(self.model, outcome, seconds, prompt, completion, cost, cached, self._spent_at)
        record(call)
        if self._on_call is not None:
            self._on_call(call)
        return call

    async def _request(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> httpx.Response:
        """The chat completion's HTTP response, through the SDK: it adds the headers and the timeout,
        sends, and raises its errors (a status error for a 4xx or 5xx)."""
        body = chat_body(self.model, messages, response_format)
        options = self._chat.model_copy(update={"content": orjson.dumps(body)})
        return await self._client.request(httpx.Response, options)

    @staticmethod
    def _decode(raw: httpx.Response) -> dict[str, Any] | None:
        """The body as a dict; None when it is not a JSON object."""
        try:
            body = orjson.loads(raw.content)
        except orjson.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    def _translate(self, e: openai.OpenAIError) -> DocllmError:
        return translate(e, self._where, self._timeout, self._key, self.model, timed_out=not _refused(e))


def _reported_tokens(body: dict[str, Any] | None) -> tuple[int, int, int] | None:
    """``chat.reported_tokens`` with a warning for a count beyond belief (once per field)."""
    return reported_tokens(body, bounded)


def gen_ai_answer(body: dict[str, Any] | None, call: LlmCall) -> dict[str, Any]:
    """A call's GenAI span attributes: usage, finish reasons, response model; never the text."""
    attributes: dict[str, Any] = {
        "docllm.llm.outcome": call.outcome,
        "gen_ai.usage.input_tokens": call.prompt_tokens,
        "gen_ai.usage.output_tokens": call.completion_tokens,
    }
    if body is None:
        return attributes
    choices = body.get("choices")
    reasons = [c.get("finish_reason") for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []
    attributes["gen_ai.response.finish_reasons"] = tuple(str(r)[:40] for r in reasons if r is not None)
    if isinstance(body.get("model"), str):
        attributes["gen_ai.response.model"] = body["model"][:200]
    return attributes


def _refused(e: BaseException) -> bool:
    """Whether an error the SDK calls a timeout is a connection that failed without timing out: the
    aiohttp transport maps every ``aiohttp.ClientConnectionError`` (refused, reset, closed by the
    server) to httpx's ``ConnectTimeout``."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:  # a chain can loop back on itself
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, TimeoutError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _about_response_format(e: openai.BadRequestError) -> bool:
    return about_response_format(e.param, str(e.body or e.message))


def _kind(rung: int) -> str:
    form = RUNGS[rung]
    return str(form["type"]) if form else "none"
