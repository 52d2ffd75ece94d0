"""A stand-in LLM for the LLM-bound benchmark: an OpenAI-compatible chat-completions server that
answers every request after a fixed latency, cheaply enough never to be the bottleneck.

    python -m bench.llm_mock --port 0 --latency 1.0     # prints its port, serves until SIGTERM

One process, one asyncio loop (uvloop's when installed), raw HTTP/1.1 with keep-alive: a request
costs a header parse and a ``call_at``; no coroutine, no JSON decoding. Every answer is the same valid chat completion
(with ``usage``) whose content is a valid docllm report (one finding on line 1, which every
document has), so docllm's OpenAIReviewer and the peers' calls parse it as they would a real one.

Routes: ``POST /v1/chat/completions`` (after the latency); ``GET /v1/models/{id}`` (at once, for
the reviewer's start-up check); ``GET /stats`` (JSON: chat requests received and answered, the
first request's arrival as ``time.time()``, the most in flight at once); ``GET /arrivals`` (JSON:
each chat request's arrival since the last reset, ``time.time()``); ``POST /reset`` (zeroes the
counters). Anything else: 404.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time

REPORT = {
    "findings": [
        {
            "category": "clarity",
            "severity": "low",
            "location": {"heading": "", "line_start": 1, "line_end": 1},
            "quote": "",
            "message": "The first line could say more.",
            "suggestion": "",
        }
    ],
    "summary": "Reviewed by the benchmark's mock LLM.",
}
COMPLETION = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 0,
    "model": "bench-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(REPORT)}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 600, "completion_tokens": 60, "total_tokens": 660},
}


def response(status: str, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: keep-alive\r\n\r\n"
    ).encode() + body


CHAT = response("200 OK", json.dumps(COMPLETION).encode())
NOT_FOUND = response("404 Not Found", b'{"error": {"message": "no such route", "type": "invalid_request_error"}}')


class Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.received = self.answered = self.in_flight = self.max_in_flight = 0
        self.arrivals: list[float] = []  # each chat request's arrival, time.time() (GET /arrivals)

    def as_json(self) -> bytes:
        return json.dumps(
            {
                "received": self.received,
                "answered": self.answered,
                "first": self.arrivals[0] if self.arrivals else None,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
            }
        ).encode()


class MockProtocol(asyncio.Protocol):
    """One keep-alive connection. Requests are answered in order (HTTP/1.1 has no ids): a
    pipelined request's answer goes out ``latency`` after it arrived or right after the one before."""

    def __init__(self, latency: float, stats: Stats):
        self.latency, self.stats = latency, stats
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.last_due = 0.0
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            at = head.lower().find(b"\r\ncontent-length:")
            length = int(head[at + 17 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            method, path = (head.split(b" ", 2) + [b"", b""])[:2]
            self.route(method.decode("latin-1"), path.decode("latin-1"))

    def route(self, method: str, path: str) -> None:
        if method == "POST" and path.endswith("/chat/completions"):
            s = self.stats
            s.received += 1
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
            s.arrivals.append(time.time())
            due = max(self.loop.time() + self.latency, self.last_due)
            self.last_due = due
            self.loop.call_at(due, self.answer_chat)
        elif method == "GET" and "/models/" in path:
            model = path.rsplit("/", 1)[-1]
            self.send(
                response(
                    "200 OK", json.dumps({"id": model, "object": "model", "created": 0, "owned_by": "bench"}).encode()
                )
            )
        elif path == "/stats":
            self.send(response("200 OK", self.stats.as_json()))
        elif path == "/arrivals":
            self.send(response("200 OK", json.dumps(self.stats.arrivals).encode()))
        elif method == "POST" and path == "/reset":
            self.stats.reset()
            self.send(response("200 OK", b"{}"))
        else:
            self.send(NOT_FOUND)

    def answer_chat(self) -> None:
        self.stats.in_flight -= 1
        if self.send(CHAT):
            self.stats.answered += 1

    def send(self, data: bytes) -> bool:
        if self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(data)
        return True


async def serve(port: int, latency: float, host: str = "127.0.0.1") -> None:
    loop = asyncio.get_running_loop()
    stats = Stats()
    server = await loop.create_server(lambda: MockProtocol(latency, stats), host, port, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    done = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    server.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency", type=float, default=1.0, help="seconds before each chat completion is answered")
    args = p.parse_args(argv)
    try:
        import uvloop  # cheaper transports: the mock must cost far less than the workers it serves
    except ImportError:
        asyncio.run(serve(args.port, args.latency))
    else:
        uvloop.run(serve(args.port, args.latency))


if __name__ == "__main__":
    main()
