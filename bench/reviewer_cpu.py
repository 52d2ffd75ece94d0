"""Issue 24: the reviewer's CPU per request, lever by lever, against the bench's mock LLM.

    PYTHONPATH=src:. python -m bench.reviewer_cpu                      # C = 256, 1024; 3 rounds
    PYTHONPATH=src:. python -m bench.reviewer_cpu --concurrency 64 --rounds 2 --latency 0.5
    PYTHONPATH=src:. python -m bench.reviewer_cpu --quick              # the smoke run
    PYTHONPATH=src:. python -m bench.reviewer_cpu --parts              # the small levers alone (timeit)

``OpenAIReviewer`` alone (no queue, no database): C reviews in flight at once on one asyncio loop,
N = 4C reviews of the bench document, each one chat completion against ``bench.llm_mock`` (its own
process) with a fixed latency. The figure is this process's ``time.process_time()`` over the N
reviews / N, after a warm-up round that opens the connections. Each variant is the reviewer with
some levers of issue 24 taken back (subclasses below); the variants run interleaved, in a rotated
order, ``--rounds`` times, and each ratio is to ``before`` of the same round and C (this machine is
shared: only ratios inside one run mean anything). ``--parts`` times the two levers too small for
that A/B to resolve, alone, in microseconds per request: the options built per call or copied, and
the body encoded and the answer decoded with json or orjson.

Variants (the reviewer's levers: transport; how the request is made; how the answer is read):

- ``before``: httpx pools, ``chat.completions.with_raw_response.create`` (typed parameters: the
  SDK's recursive transform), the answer parsed into the SDK's pydantic model (the code before issue 24);
- ``aiohttp``: as ``before`` on the SDK's aiohttp transport;
- ``aiohttp+raw``: as ``aiohttp``, the answer decoded once with orjson instead of the pydantic model;
- ``httpx+post``: httpx pools, the body a plain dict sent with the options built once, decoded with orjson;
- ``aiohttp+post, options per call``: as ``after`` through ``client.post`` (its options built per request);
- ``aiohttp+post, json``: as ``after``, with the standard library's json instead of orjson;
- ``after, each request built by the SDK``: as ``after`` on the SDK's own client (not
  ``BuiltOnceClient``, whose chat request is a copy of the last one with its body);
- ``after``: the reviewer as built (aiohttp, the body through ``client.request`` with options built
  once, the request a copy of the last one, orjson).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import openai
import orjson

from bench.llm_mock_client import MockLLM
from bench.llm_task import DOCUMENT, MODEL
from docllm.adapters.llm.openai_reviewer import OpenAIReviewer, httpx
from docllm.domain.review.chat import JSON_MODE


class _Httpx(OpenAIReviewer):
    @staticmethod
    def _http_client(limits: httpx.Limits, tls: Any = True) -> httpx.AsyncClient:
        return openai.DefaultAsyncHttpxClient(limits=limits, verify=tls)


class _Create(OpenAIReviewer):
    """The request as before issue 24: typed parameters through ``create``, the raw response kept."""

    async def _request(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> Any:
        create = self._client.chat.completions.with_raw_response.create
        if response_format is not None:
            return await create(model=self.model, messages=messages, response_format=response_format)  # type: ignore[arg-type]
        return await create(model=self.model, messages=messages)  # type: ignore[arg-type]


class _Model(_Create):
    """The answer as before issue 24: the SDK's pydantic model, read for the usage and the message."""

    @staticmethod
    def _decode(raw: Any) -> dict[str, Any] | None:
        response = raw.parse()
        usage = response.usage
        return {
            "usage": usage and {f: getattr(usage, f) for f in ("prompt_tokens", "completion_tokens", "total_tokens")},
            "choices": [{"message": {"content": c.message.content}} for c in response.choices[:1]],
        }


class _RawCreate(_Create):
    @staticmethod
    def _decode(raw: Any) -> dict[str, Any] | None:
        return OpenAIReviewer._decode(raw.http_response)


class Before(_Httpx, _Model):
    pass


class Aiohttp(_Model):
    pass


class AiohttpRaw(_RawCreate):
    pass


class HttpxPost(_Httpx):
    pass


class OptionsPerCall(OpenAIReviewer):
    async def _request(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> httpx.Response:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if response_format is not None:
            body["response_format"] = response_format
        return await self._client.post("/chat/completions", cast_to=httpx.Response, content=orjson.dumps(body))


class StdlibJson(OpenAIReviewer):
    async def _request(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None) -> httpx.Response:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if response_format is not None:
            body["response_format"] = response_format
        options = self._chat.model_copy(update={"content": json.dumps(body).encode()})
        return await self._client.request(httpx.Response, options)

    @staticmethod
    def _decode(raw: httpx.Response) -> dict[str, Any] | None:
        body = json.loads(raw.content)
        return body if isinstance(body, dict) else None


class SdkBuilt(OpenAIReviewer):
    client_class = openai.AsyncOpenAI


class HttpxSend(OpenAIReviewer):
    """After, but each request through httpx's own ``send`` (no ``lean_http``)."""

    @staticmethod
    def _http_client(limits: httpx.Limits, tls: Any = True) -> httpx.AsyncClient:
        return openai.DefaultAioHttpClient(limits=limits, verify=tls)


VARIANTS: dict[str, type[OpenAIReviewer]] = {
    "before": Before,
    "aiohttp": Aiohttp,
    "aiohttp+raw": AiohttpRaw,
    "httpx+post": HttpxPost,
    "aiohttp+post, options per call": OptionsPerCall,
    "aiohttp+post, json": StdlibJson,
    "after, each request built by the SDK": SdkBuilt,
    "after, httpx's own send": HttpxSend,
    "after": OpenAIReviewer,
}


async def trial(kind: type[OpenAIReviewer], base_url: str, c: int, rounds: int) -> dict[str, float]:
    reviewer = kind(base_url, "bench", MODEL, timeout_seconds=60.0, max_connections=c)

    async def lane(i: int, n: int) -> None:
        for j in range(n):
            report = await reviewer.review(f"bench-{i}-{j}", DOCUMENT)
            assert report["findings"], report

    try:
        await asyncio.gather(*(lane(i, 1) for i in range(c)))  # warm-up: every connection opened
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(lane(i, rounds) for i in range(c)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await reviewer.close()
    n = c * rounds
    return {"cpu_ms": cpu * 1000 / n, "per_s": n / wall}


def _part_cases(once: Any, body: dict[str, Any], encoded: bytes, answer: bytes) -> dict[str, Any]:
    from openai._models import FinalRequestOptions

    return {
        "options built per call (client.post)": lambda: FinalRequestOptions.construct(
            method="post", url="/chat/completions", content=encoded, files=None
        ),
        "options built once, copied": lambda: once.model_copy(update={"content": encoded}),
        "body: json.dumps": lambda: json.dumps(body).encode(),
        "body: orjson.dumps": lambda: orjson.dumps(body),
        "answer: json.loads": lambda: json.loads(answer),
        "answer: orjson.loads": lambda: orjson.loads(answer),
    }


def parts() -> None:
    """The small levers alone, with timeit: microseconds per request, best of 5."""
    from openai._models import FinalRequestOptions

    from bench.llm_mock import CHAT
    from docllm.domain.review.prompt import build_messages

    once = FinalRequestOptions.construct(method="post", url="/chat/completions")
    answer = CHAT.split(b"\r\n\r\n", 1)[1]
    chunk = ("Plain steady text about the installer, with a few more words. " * 200)[:11_900]
    for doc_name, doc in (("the bench document", DOCUMENT), ("a 12,000-character chunk", "# Manual\n\n" + chunk)):
        body = {"model": MODEL, "messages": build_messages("bench", doc), "response_format": JSON_MODE}
        encoded = orjson.dumps(body)
        cases = _part_cases(once, body, encoded, answer)
        print(f"{doc_name}: request body {len(encoded):,} bytes, answer {len(answer):,} bytes")
        for name, fn in cases.items():
            n = 5000
            best = min(timeit.repeat(fn, number=n, repeat=5)) / n
            print(f"  {name}: {best * 1e6:.1f} us")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--latency", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of every variant")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    p.add_argument("--quick", action="store_true", help="C = 8, latency 0.05 s, one round")
    p.add_argument("--parts", action="store_true", help="only the small levers alone, with timeit")
    args = p.parse_args(argv)
    if args.parts:
        parts()
        return
    if args.quick:
        args.concurrency, args.latency, args.rounds = [8], 0.05, 1
    names = ["before"] + [v for v in args.variants if v != "before"]
    figures: dict[tuple[int, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, MockLLM(args.latency, Path(tmp) / "mock.log") as mock:
        for r in range(args.rounds):
            for c in args.concurrency:
                order = names[r % len(names) :] + names[: r % len(names)]
                for name in order:
                    f = asyncio.run(trial(VARIANTS[name], mock.base_url, c, 4))
                    figures.setdefault((c, name), []).append(f)
                    print(
                        f"round {r + 1} C={c} {name}: {f['cpu_ms']:.3f} CPU ms/request, {f['per_s']:.0f}/s", flush=True
                    )
    print()
    print("| C | variant | CPU ms/request (median) | / before (median of the rounds' ratios) | requests/s (median) |")
    print("|---|---|---|---|---|")
    for c in args.concurrency:
        for name in names:
            runs = figures[(c, name)]
            ratios = [f["cpu_ms"] / b["cpu_ms"] for f, b in zip(runs, figures[(c, "before")], strict=True)]
            print(
                f"| {c} | {name} | {statistics.median(f['cpu_ms'] for f in runs):.3f} "
                f"| {statistics.median(ratios):.3f} ({', '.join(f'{x:.2f}' for x in ratios)}) "
                f"| {statistics.median(f['per_s'] for f in runs):.0f} |"
            )


if __name__ == "__main__":
    main()
