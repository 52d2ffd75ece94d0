"""The bench's handle on the mock LLM (``bench.llm_mock``): start it as a process, read and reset its
counters, and check that it is not the bottleneck with a plain asyncio client."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import PYTHON, child_env, cpu_seconds, percentile, spawn, stop, tail, wait_for


class MockLLM:
    """``python -m bench.llm_mock`` in a process of its own, on a free loopback port."""

    def __init__(self, latency: float, log: Path):
        self.latency, self.log = latency, log
        self.proc = None
        self.port = 0

    def __enter__(self) -> MockLLM:
        self.log.write_text("")
        self.proc = spawn(
            [PYTHON, "-m", "bench.llm_mock", "--port", "0", "--latency", str(self.latency)], child_env(), self.log
        )

        def port() -> int:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mock LLM exited with {self.proc.returncode}:\n{tail(self.log)}")
            first = self.log.read_text().split("\n", 1)[0].strip()
            return int(first) if first.isdigit() else 0

        self.port = wait_for(port, 30, 0.02, "the mock LLM's port")
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc, timeout=5)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())

    def arrivals(self) -> list[float]:
        """Each chat request's arrival since the last reset (``time.time()``)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/arrivals", timeout=30) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        urllib.request.urlopen(
            urllib.request.Request(f"http://127.0.0.1:{self.port}/reset", method="POST"), timeout=10
        ).read()

    def cpu(self) -> float | None:
        return cpu_seconds(self.proc.pid)


def request_body() -> bytes:
    """What docllm sends for the bench document: the real prompt, so the mock parses real sizes."""
    from bench.llm_task import DOCUMENT
    from docllm.domain.review.chat import STRICT_SCHEMA
    from docllm.domain.review.prompt import build_messages

    return json.dumps(
        {
            "model": "bench-model",
            "messages": build_messages("bench-0", DOCUMENT),
            "response_format": STRICT_SCHEMA,  # what the reviewer asks a server first
        }
    ).encode()


class _Client(asyncio.Protocol):
    """One keep-alive connection sending ``rounds`` requests back to back; notes each answer's
    send and receive times. A Protocol, not streams: the client must cost less than the server."""

    def __init__(self, request: bytes, rounds: int, done: asyncio.Future):
        self.request, self.left, self.done = request, rounds, done
        self.buffer = b""
        self.sent = 0.0
        self.times: list[tuple[float, float]] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self) -> None:
        self.sent = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        length = int(self.buffer[:end].lower().split(b"content-length:")[1].split(b"\r\n")[0])
        if len(self.buffer) < end + 4 + length:
            return
        body, self.buffer = self.buffer[end + 4 : end + 4 + length], self.buffer[end + 4 + length :]
        self.times.append((self.sent, time.perf_counter()))
        assert b'"choices"' in body
        self.left -= 1
        if self.left:
            self.send()
        else:
            self.transport.close()
            self.done.set_result(None)


async def _load(port: int, concurrency: int, rounds: int) -> list[tuple[float, float]]:
    body = request_body()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    clients = []
    for _ in range(concurrency):
        client = _Client(request, rounds, loop.create_future())
        await loop.create_connection(lambda c=client: c, "127.0.0.1", port)
        clients.append(client)
    await asyncio.sleep(0.2)  # every connection is open before the clock starts
    for client in clients:
        client.send()
    await asyncio.gather(*(c.done for c in clients))
    return [t for c in clients for t in c.times]


def load_check(mock: MockLLM, concurrency: int, rounds: int = 4) -> dict[str, Any]:
    """``concurrency`` keep-alive connections, ``rounds`` requests each, all started at once.

    ``ratio``: answers a second over the whole run / (C / L), what a worker draining N = rounds x C
    tasks could reach at best. ``over_latency_ms``: how much longer than L a request took, seen by
    the client (the mock's queueing and the client's own, both)."""
    mock.reset()
    cpu0 = mock.cpu()
    try:
        import uvloop
    except ImportError:
        times = asyncio.run(_load(mock.port, concurrency, rounds))
    else:
        times = uvloop.run(_load(mock.port, concurrency, rounds))
    cpu1 = mock.cpu()
    start, end = min(s for s, _ in times), max(r for _, r in times)
    latency = mock.latency
    over = [(r - s - latency) * 1000 for s, r in times]
    ideal = concurrency / latency
    return {
        "concurrency": concurrency,
        "rounds": rounds,
        "latency_s": latency,
        "requests": len(times),
        "elapsed_s": end - start,
        "per_s": len(times) / (end - start),
        "ratio": len(times) / (end - start) / ideal,
        "over_latency_ms_p50": percentile(over, 50),
        "over_latency_ms_p99": percentile(over, 99),
        "max_in_flight": mock.stats()["max_in_flight"],
        "mock_cpu_ms_per_request": None if None in (cpu0, cpu1) else (cpu1 - cpu0) * 1000 / len(times),
    }
