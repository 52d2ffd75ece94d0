"""A burst of answers through the reviewer's HTTP client (``lean_http`` + ``answer_turns``): when
every answer is already in when the loop looks, the requests still go on a few per iteration, in
turn, so what each answer starts next is not held behind the whole burst (issue 24)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from docllm.adapters.llm.answer_turns import WIDTH
from docllm.adapters.llm.lean_http import LeanAioHttpClient, httpx
from tests.support.loop_iterations import Iterations

WAIT_S = 30.0  # generous: reached only when something is broken
BODY = b'{"id": "x", "object": "chat.completion", "choices": []}'


class BurstServer:
    """An HTTP server on loopback, in its own thread and loop, that answers no request until told
    to (``answer_all``), then answers them all; ``answered`` is set once every answer is written."""

    def __init__(self, n: int):
        self.n, self.received = n, 0
        self.answered, self._ready = threading.Event(), threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> BurstServer:
        self.thread.start()
        server = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(WAIT_S)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"
        return self

    def answer_all(self) -> None:
        self.loop.call_soon_threadsafe(self.all_in.set)

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)

    async def _start(self) -> asyncio.Server:
        self.all_in, self.written = asyncio.Event(), 0
        return await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
        )
        await reader.readexactly(length)
        self.received += 1
        await self.all_in.wait()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n".encode()
            + BODY
        )
        await writer.drain()
        self.written += 1
        if self.written == self.n:
            self.answered.set()
        writer.close()


def test_a_burst_of_answers_goes_on_a_few_per_loop_iteration_in_turn():
    n = 3 * WIDTH + 5

    async def main(server: BurstServer) -> list[int]:
        loop = asyncio.get_running_loop()
        client = LeanAioHttpClient(limits=httpx.Limits(max_connections=n), timeout=WAIT_S)
        iterations: Iterations | None = None
        returned: list[int] = []

        async def one() -> None:
            response = await client.send(client.build_request("POST", server.url, content=b"{}"))
            assert response.status_code == 200 and response.content == BODY
            assert iterations is not None  # counting started before the answers were read
            returned.append(iterations.n)

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        while server.received < n:
            await asyncio.sleep(0.01)
        server.answer_all()
        # Block the loop until every answer is written: its next look finds them all in at once.
        assert server.answered.wait(WAIT_S), "the server never answered"
        iterations = Iterations(loop)
        await asyncio.gather(*tasks)
        await client.aclose()
        return returned

    with BurstServer(n) as server:
        returned = asyncio.run(main(server))
    per_iteration = Counter(returned)
    assert max(per_iteration.values()) <= WIDTH, per_iteration
    assert len(per_iteration) >= 4, per_iteration  # 3 x WIDTH + 5 answers: at least four iterations
