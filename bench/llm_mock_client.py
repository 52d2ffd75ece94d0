"""The bench's handle on the mock LLM (``bench.llm_mock``): start it as a process, read and reset its
counters, and check that it is not the bottleneck with a plain asyncio client."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import PYTHON, child_env, cpu_seconds, spawn, stop, tail, wait_for


class MockLLM:
    """``python -m bench.llm_mock`` in a process of its own, on a free loopback port."""

    def __init__(self, latency: float, log: Path):
        self.latency, self.log = latency, log
        self.proc = None
        self.port = 0

    def __enter__(self) -> MockLLM:
        self.log.write_text("")
        self.proc = spawn([PYTHON, "-m", "bench.llm_mock", "--port", "0", "--latency", str(self.latency)],
                          child_env(), self.log)

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

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/reset", method="POST"),
                               timeout=10).read()

    def cpu(self) -> float | None:
        return cpu_seconds(self.proc.pid)


def request_body() -> bytes:
    """What docllm sends for the bench document: the real prompt, so the mock parses real sizes."""
    from bench.llm_task import DOCUMENT
    from docllm.domain.prompt import build_messages

    return json.dumps({"model": "bench-model", "messages": build_messages("bench-0", DOCUMENT),
                       "response_format": {"type": "json_object"}}).encode()


async def _load(port: int, concurrency: int, rounds: int) -> dict[str, Any]:
    body = request_body()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    conns = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(concurrency)))
    go = asyncio.Event()
    done = 0

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal done
        await go.wait()
        for _ in range(rounds):
            writer.write(head + body)
            headers = await reader.readuntil(b"\r\n\r\n")
            length = int(headers.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            answer = json.loads(await reader.readexactly(length))
            assert answer["choices"][0]["message"]["content"]
            done += 1
        writer.close()

    tasks = [asyncio.create_task(one(r, w)) for r, w in conns]
    await asyncio.sleep(0.2)  # every connection is open before the clock starts
    start = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    return {"elapsed_s": time.perf_counter() - start, "requests": done}


def load_check(mock: MockLLM, concurrency: int, rounds: int = 4) -> dict[str, Any]:
    """``concurrency`` keep-alive connections, ``rounds`` requests each, all started at once: the
    mock is not the bottleneck when this delivers close to concurrency / latency answers a second."""
    mock.reset()
    cpu0 = mock.cpu()
    result = asyncio.run(_load(mock.port, concurrency, rounds))
    cpu1 = mock.cpu()
    per_s = result["requests"] / result["elapsed_s"]
    return {"concurrency": concurrency, "rounds": rounds, "latency_s": mock.latency, **result, "per_s": per_s,
            "ratio": per_s / (concurrency / mock.latency), "max_in_flight": mock.stats()["max_in_flight"],
            "mock_cpu_ms_per_request": None if None in (cpu0, cpu1) else (cpu1 - cpu0) * 1000 / result["requests"]}
