"""A small OpenAI-compatible server on loopback: scripted replies, a smart default, chaos knobs.

In a test::

    with FakeLLM() as llm:
        llm.script(Reply(status=429, headers={"Retry-After": "7"}), Reply(content="not json"))
        reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", timeout_seconds=1)
        ...
        llm.requests[-1]["body"]["messages"]  # every request: method, path, headers (lowercase), body

Scripted replies are consumed in order, one per request (any route); then the default answers:
401 to everything when ``unauthorized``, else chaos (latency, 429/500 at the seeded rates), else the
route: ``GET /v1/models/{id}`` and ``POST /v1/chat/completions`` (404 for a model not in ``models``,
400 when ``reject_response_format`` and the request asks for it, or ``reject_json_schema`` and it asks for
a ``json_schema`` (a server without structured output), else a valid report whose one finding
quotes the first heading of the numbered document in the last user message that has one).
With ``rpm``/``tpm`` (one number for every model, or a dict per model) the chat route enforces a
provider's limits per model over a sliding window
(``window_s``, 60 s): above them it answers 429 with a ``Retry-After`` until the window has room;
``served`` keeps (monotonic time, model, status, tokens) of every chat request for the tests to count.
With ``cached_tokens`` every default answer reports that many of its prompt tokens as served from
a prompt cache, in the field ``cached_as`` names (``CACHED_FIELDS``).
A scripted ``Reply`` without a body adds its headers to the default answer.

The Files and Batch APIs (``tests.support.llm_batches``, in memory, nothing on disk), after the same
401/chaos as every route: ``POST /v1/files`` (multipart ``file``, ``purpose``), ``GET /v1/files[/{id}]``,
``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``; ``POST /v1/batches``, ``GET /v1/batches``
(newest first, ``after``/``limit``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.
Each line of a batch is answered by the chat route's logic (smart answer, usage, ``cached_tokens``;
no rate limits); a batch runs ``batch_delay_s`` (seconds, or a seeded (low, high)) on the monotonic
clock, worked out when it is read: validating, in_progress, finalizing, completed; the output file
holds the 200 answers and the error file the rest, each in a seeded shuffled order (a file with no
lines is not made: its id stays null). Knobs: ``batch_fail_rate`` (seeded fraction of lines answered
500), ``poison_marker`` (lines whose messages contain it answer 400 ``context_length_exceeded``: the
document's fault), ``expire_batches`` (the next N batches created, or those a predicate on the batch
picks, end ``expired`` at their delay: half their lines answered, the rest ``batch_expired`` errors),
``lose_files`` (those batches' result files answer 404 once made), ``fail_batches`` (end ``failed``
after validating, no files), ``cancel_delay_s`` (how long a cancelled batch stays ``cancelling``;
lines answered before the cancel are kept, the rest are ``batch_cancelled`` errors).
``llm.batches.counters`` counts files_created, batches_created, batches_cancelled, batch_lines (lines
written to a result file), batch_lines_failed, content_reads, content_lost (a 404 on a lost file);
``GET /_fake/counters`` answers them as JSON, for a test in another process.
Holds, to kill a caller at a known step: ``llm.batches.arm(route, seconds, count)`` (or ``POST
/_fake/hold`` with ``{"route", "seconds", "count"}`` from another process) holds the answer of the
next ``count`` successful ``create`` (``POST /v1/batches``: the batch is made, its answer waits) or
``retrieve`` (``GET /v1/batches/{id}``) requests for ``seconds``; counted ``creates_held``,
``retrieves_held``; ``GET /_fake/held`` lists the requests held (route, path, batch_id, ref: the
batch's ``docllm_ref``, and peer: the client's TCP port, to tell which process sent it).

As a process: ``python -m tests.support.llm_server --port 0 --latency-ms 5-50 --rate-429 0.1
--rate-500 0.05 --seed 1`` prints its port, then serves until SIGTERM or SIGINT; the batch knobs are
``--batch-delay-s 0.5`` (or ``0.2-2``), ``--batch-fail-rate``, ``--poison-marker``, ``--expire-batches``,
``--lose-files``, ``--fail-batches`` (``N``: the next N created, or ``at:I,J``: the I-th and J-th
created, from 1), ``--cancel-delay-s``; ``--cached-tokens`` as the argument.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import random
import re
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.support.llm_batches import FakeBatches, Pick, parse_form, pick_from_cli

_NUMBERED = re.compile(r"^(\d+)\| (.*)$", re.M)


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict goes out as JSON, a str as it is; None (and no content): the default answers
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    content: str | None = None  # shorthand for a chat completion whose message is this text
    content_type: str = "application/json"


def completion(content: str, model: str = "test-model", prompt_tokens: int = 10, completion_tokens: int = 5) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error(status: int, message: str, param: str | None = None, code: str | None = None, **headers: str) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return Reply(status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()})


def smart_answer(request: dict) -> dict:
    """A valid report about the document in the last user message: one finding on its first heading."""
    users = [str(m.get("content") or "") for m in request.get("messages", []) if m.get("role") == "user"]
    numbered = [found for found in map(_NUMBERED.findall, users) if found]  # a repair request has none
    lines = [(int(n), text) for n, text in (numbered[-1] if numbered else [])]
    first = next((x for x in lines if x[1].startswith("#")), next((x for x in lines if x[1].strip()), None))
    findings = []
    if first:
        no, text = first
        title = text.lstrip("#").strip()
        findings.append(
            {
                "category": "clarity",
                "severity": "low",
                "location": {"heading": title if text.startswith("#") else "", "line_start": no, "line_end": no},
                "quote": text,
                "message": f"Reviewed the part that starts with {title!r}.",
                "suggestion": "",
            }
        )
    report = {"findings": findings, "summary": f"Reviewed {len(lines)} lines."}
    prompt_chars = sum(len(str(m.get("content") or "")) for m in request.get("messages", []))
    content = json.dumps(report)
    return completion(content, request.get("model", "test-model"), prompt_chars // 4 + 1, len(content) // 4 + 1)


# How servers report cached prompt tokens: OpenAI, DeepSeek, Anthropic's compatible layer.
CACHED_FIELDS = ("prompt_tokens_details.cached_tokens", "prompt_cache_hit_tokens", "cache_read_input_tokens")


def with_cached(answer: dict, cached: int, field: str) -> dict:
    """``answer`` reporting ``cached`` of its prompt tokens (more, to test a server that lies) as
    read from the prompt cache."""
    usage = answer["usage"]
    parent, _, leaf = field.rpartition(".")
    (usage.setdefault(parent, {}) if parent else usage)[leaf] = cached
    return answer


class FakeLLM:
    def __init__(
        self,
        *,
        port: int = 0,
        seed: int = 0,
        latency_ms: tuple[float, float] = (0, 0),
        rate_429: float = 0.0,
        rate_500: float = 0.0,
        unauthorized: bool = False,
        models: set[str] | None = None,
        reject_response_format: bool = False,
        reject_json_schema: bool = False,
        rpm: int | dict[str, int] | None = None,
        tpm: int | dict[str, int] | None = None,
        window_s: float = 60.0,
        cached_tokens: int = 0,
        cached_as: str = CACHED_FIELDS[0],
        batch_delay_s: float | tuple[float, float] = 0.0,
        batch_fail_rate: float = 0.0,
        poison_marker: str | None = None,
        expire_batches: Pick = 0,
        lose_files: Pick = 0,
        fail_batches: Pick = 0,
        cancel_delay_s: float = 0.0,
        shapes: Sequence[str] = (),
    ):
        self.shapes = [parse_shape(rule) for rule in shapes]
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self.cached_tokens, self.cached_as = cached_tokens, cached_as
        self.served: list[tuple[float, str, int, int]] = []
        self.latency_ms, self.rate_429, self.rate_500 = latency_ms, rate_429, rate_500
        self.unauthorized, self.models, self.reject_response_format = unauthorized, models, reject_response_format
        self.reject_json_schema = reject_json_schema
        self.requests: list[dict] = []
        self.in_flight = self.max_in_flight = 0  # requests being answered now, and the most at once
        self._queue: collections.deque[Reply] = collections.deque()
        self._rng, self._lock, self._stopping = random.Random(seed), threading.Lock(), threading.Event()
        self.peer = threading.local()  # ``port``: the client port of the request this thread answers
        self.batches = FakeBatches(
            self._chat_line,
            seed=seed,
            batch_delay_s=batch_delay_s,
            batch_fail_rate=batch_fail_rate,
            poison_marker=poison_marker,
            expire_batches=expire_batches,
            lose_files=lose_files,
            fail_batches=fail_batches,
            cancel_delay_s=cancel_delay_s,
        )
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.fake = self  # type: ignore[attr-defined]
        serve = lambda: self._httpd.serve_forever(poll_interval=0.02)  # noqa: E731  (a quick stop)
        self._thread = threading.Thread(target=serve, name="fake-llm", daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    __enter__ = start

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def answering(self, change: int) -> None:
        with self._lock:
            self.in_flight += change
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def answer(self, method: str, path: str, headers: dict[str, str], body: Any) -> Reply:
        if path == "/_fake/counters":  # for a test in another process; not a request of the API
            return Reply(body=dict(self.batches.counters))
        if path == "/_fake/held":  # the batch requests whose answers a hold kept waiting
            return Reply(body=list(self.batches.held))
        if path == "/_fake/hold" and method == "POST" and isinstance(body, dict):
            try:
                self.batches.arm(str(body.get("route")), float(body["seconds"]), int(body.get("count", 1)))
            except (KeyError, TypeError, ValueError) as exc:
                return error(400, f"a hold needs route and seconds: {exc}")
            return Reply(body={"armed": body})
        with self._lock:
            self.requests.append({"method": method, "path": path, "headers": headers, "body": body})
            scripted = self._queue.popleft() if self._queue else None
            latency = self._rng.uniform(*self.latency_ms) / 1000
            draw = self._rng.random()
        if scripted and (scripted.body is not None or scripted.content is not None or scripted.status != 200):
            body = completion(scripted.content) if scripted.content is not None else scripted.body
            return Reply(scripted.status, body, scripted.headers, scripted.delay, content_type=scripted.content_type)
        reply = self._default(method, path, body if isinstance(body, dict) else {}, draw)
        reply.delay = max(reply.delay, scripted.delay if scripted else latency)  # a batch hold, or the latency
        if scripted:
            reply.headers.update(scripted.headers)
        return reply

    def _within_limits(self, model: str, answer: dict) -> Reply:
        """The answer, or a 429 when it would take the model over its limits in the window."""
        tokens = int(answer.get("usage", {}).get("total_tokens", 0))
        with self._lock:
            now = time.monotonic()
            recent = [
                (at, n) for at, m, status, n in self.served if m == model and status == 200 and at > now - self.window_s
            ]
            rpm, tpm = _per_model(self.rpm, model), _per_model(self.tpm, model)
            over = (rpm is not None and len(recent) + 1 > rpm) or (
                tpm is not None and sum(n for _, n in recent) + tokens > tpm
            )
            self.served.append((now, model, 429 if over else 200, tokens))  # tokens it would have cost
        if not over:
            return Reply(body=answer)
        room = max(0.0, recent[0][0] + self.window_s - now) if recent else 1.0
        return error(429, "Rate limit reached for requests.", retry_after=str(max(1, round(room))))

    def _default(self, method: str, path: str, body: dict, draw: float) -> Reply:
        if self.unauthorized:
            return error(401, "Incorrect API key provided.", code="invalid_api_key")
        if draw < self.rate_429:
            return error(429, "Rate limit reached.", retry_after="1")
        if draw < self.rate_429 + self.rate_500:
            return error(500, "The server had an error.")
        if self.batches.owns(path):
            status, answer, content_type = self.batches.serve(method, path, body)
            held = self.batches.hold_for(method, path, status, answer, getattr(self.peer, "port", 0))
            return Reply(status, answer, content_type=content_type, delay=held)
        model = path.rsplit("/", 1)[-1] if path.startswith("/v1/models/") else body.get("model", "")
        if self.models is not None and model not in self.models:
            return error(404, f"The model `{model}` does not exist.", code="model_not_found")
        if method == "GET" and path.startswith("/v1/models/"):
            return Reply(body={"id": model, "object": "model", "created": 0, "owned_by": "docllm-tests"})
        if method != "POST" or path != "/v1/chat/completions":
            return error(404, f"no route {method} {path}")
        reply = self._chat(body)
        if reply.status != 200 or (self.rpm is None and self.tpm is None):
            return reply
        return self._within_limits(str(body.get("model", "")), reply.body)

    def _chat_line(self, body: dict) -> tuple[int, dict]:
        """A batch line's answer: the chat route's, without chaos or rate limits (a batch has neither)."""
        model = body.get("model", "")
        if self.models is not None and model not in self.models:
            reply = error(404, f"The model `{model}` does not exist.", code="model_not_found")
        else:
            reply = self._chat(body)
        return reply.status, reply.body

    def _chat(self, body: dict) -> Reply:
        if self.reject_response_format and "response_format" in body:
            return error(400, "response_format is not supported by this server", param="response_format")
        if self.reject_json_schema and (body.get("response_format") or {}).get("type") == "json_schema":
            return error(400, "response_format.type 'json_schema' is not supported; use 'json_object'")
        answer = smart_answer(body)
        text = json.dumps(body.get("messages", []), ensure_ascii=False)
        for marker, shape in self.shapes:
            if marker in text:
                answer = shaped(answer, shape)
        if self.cached_tokens:
            answer = with_cached(answer, self.cached_tokens, self.cached_as)
        return Reply(body=answer)


def parse_shape(rule: str) -> tuple[str, str]:
    """``MARKER=surrogate`` or ``MARKER=pad:BYTES`` (``--shape-answer``)."""
    marker, _, shape = rule.partition("=")
    if not marker or not (shape == "surrogate" or (shape.startswith("pad:") and shape[4:].isdigit())):
        raise ValueError(f"--shape-answer takes MARKER=surrogate or MARKER=pad:BYTES, got {rule!r}")
    return marker, shape


def shaped(answer: dict, shape: str) -> dict:
    """``answer`` with its report's summary changed: a lone surrogate escape in it (valid JSON that
    no UTF-8 column stores), or padded to about BYTES bytes of JSON (quotes included, which a
    MySQL driver escapes)."""
    content = answer["choices"][0]["message"]["content"]
    report = json.loads(content)
    if shape == "surrogate":
        report["summary"] += " \ud800"  # one lone surrogate: json.dumps below sends it as the escape
    else:
        size = int(shape.removeprefix("pad:"))
        piece = 'a "quoted" padding word; '
        report["summary"] += " " + piece * max(0, (size - len(content)) // (len(json.dumps(piece)) - 2))
    answer = copy.deepcopy(answer)
    answer["choices"][0]["message"]["content"] = json.dumps(report)
    return answer


def _per_model(limit: int | dict[str, int] | None, model: str) -> int | None:
    return limit.get(model) if isinstance(limit, dict) else limit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._serve(None)

    def do_DELETE(self) -> None:
        self._serve(None)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        content_type = self.headers.get("Content-Type") or ""
        if content_type.startswith("multipart/form-data"):  # a file upload
            self._serve(parse_form(content_type, raw))
            return
        try:
            self._serve(json.loads(raw or b"null"))
        except json.JSONDecodeError:
            self._serve(raw.decode("utf-8", "replace"))

    def _serve(self, body: Any) -> None:
        fake: FakeLLM = self.server.fake  # type: ignore[attr-defined]
        fake.answering(+1)
        answered = False  # counted out before the answer is sent: the client may send the next at once
        try:
            fake.peer.port = int(self.client_address[1])  # this thread's request's client port
            reply = fake.answer(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            if reply.delay and fake._stopping.wait(reply.delay):
                self.close_connection = True  # a stopped server drops the request it was holding
                return
            answered = True
            fake.answering(-1)
        finally:
            if not answered:
                fake.answering(-1)
        data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
        payload = data.encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (a timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency-ms", default="0-0", help="A-B: each answer waits uniformly A to B ms")
    p.add_argument("--rate-429", type=float, default=0.0)
    p.add_argument("--rate-500", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--unauthorized", action="store_true", help="answer 401 to everything")
    p.add_argument("--cached-tokens", type=int, default=0, help="prompt tokens every answer reports as cached")
    p.add_argument("--batch-delay-s", default="0", help="S or A-B: seconds from a batch's create to its end")
    p.add_argument("--batch-fail-rate", type=float, default=0.0, help="fraction of batch lines answered 500")
    p.add_argument("--poison-marker", default=None, help="batch lines whose messages contain it answer 400")
    pick = "N (the next N batches created) or at:I,J (the I-th, J-th created, from 1)"
    p.add_argument("--expire-batches", type=pick_from_cli, default=0, help=f"batches that end expired: {pick}")
    p.add_argument("--lose-files", type=pick_from_cli, default=0, help=f"batches whose result files 404: {pick}")
    p.add_argument("--fail-batches", type=pick_from_cli, default=0, help=f"batches that end failed: {pick}")
    p.add_argument("--cancel-delay-s", type=float, default=0.0, help="seconds a cancelled batch stays cancelling")
    p.add_argument(
        "--shape-answer",
        action="append",
        default=[],
        help="MARKER=surrogate (a lone surrogate escape in the report) or MARKER=pad:BYTES (a report of "
        "about BYTES bytes) for the chats whose messages contain MARKER (repeatable)",
    )
    args = p.parse_args(argv)
    low, _, high = args.latency_ms.partition("-")
    delay_low, _, delay_high = args.batch_delay_s.partition("-")
    fake = FakeLLM(
        port=args.port,
        seed=args.seed,
        latency_ms=(float(low), float(high or low)),
        rate_429=args.rate_429,
        rate_500=args.rate_500,
        unauthorized=args.unauthorized,
        cached_tokens=args.cached_tokens,
        batch_delay_s=(float(delay_low), float(delay_high)) if delay_high else float(delay_low),
        batch_fail_rate=args.batch_fail_rate,
        poison_marker=args.poison_marker,
        expire_batches=args.expire_batches,
        lose_files=args.lose_files,
        fail_batches=args.fail_batches,
        cancel_delay_s=args.cancel_delay_s,
        shapes=args.shape_answer,
    )
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with fake:
        print(fake.port, flush=True)
        done.wait()


if __name__ == "__main__":
    main()
