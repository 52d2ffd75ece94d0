"""The HTTP server under the process's port (``http_endpoints.py``), built so that slow or idle
clients cannot starve it (docs/DEPLOY.md, Security).

One thread runs an asyncio loop that does every socket read and write:

- a request's head and body must arrive within ``read_timeout`` of the connection's start: a
  deadline, not a per-read timeout, so a client that trickles a byte a second is cut off too;
- only a complete request reaches a thread (a small pool), so an idle or half-sent connection
  holds a socket, never a thread; a ``quick`` request (``/healthz``) is answered on the loop
  itself, never queued behind a slow page;
- at most ``max_connections`` are open: one more evicts the oldest connection that is still
  sending its request (else the oldest slow to read its answer, else the oldest complete request
  waiting for a thread), so a client holding many idle connections loses them to the next
  arrivals instead of starving them (and the process keeps its file descriptors for Redis, the
  database and the LLM);
- an answer must be taken within ``write_timeout``; one request per connection (``Connection: close``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from docllm.runtime.http_messages import (
    MAX_HEAD,
    BadRequest,
    Handler,
    Request,
    Response,
    body_length,
    encode,
    parse_head,
)

log = logging.getLogger("docllm.metrics")

READ_TIMEOUT = 10.0  # seconds for a request's head and body, from the connection's start
WRITE_TIMEOUT = 10.0  # seconds for the client to take the answer
MAX_CONNECTIONS = 64  # open at once; the oldest idle one goes when another arrives
THREADS = 4  # requests handled at once (pages that read Redis or the database)


READING, QUEUED, HANDLED, WRITING = "reading", "queued", "handled", "writing"
EVICTED_FIRST = (READING, WRITING, QUEUED)  # never HANDLED: a thread works on it (at most ``threads``)


@dataclass(eq=False)
class _Connection:
    transport: asyncio.WriteTransport
    started: float
    phase: str = READING
    evicted: bool = False  # a request still queued for a thread is dropped


class HttpServer:
    def __init__(
        self,
        host: str,
        port: int,
        handle: Handler,
        quick: Callable[[Request], bool] = lambda _: False,
        *,
        read_timeout: float = READ_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        threads: int = THREADS,
    ):
        if max_connections <= threads:
            raise ValueError("max_connections must exceed threads: a new connection must find one to evict")
        self.host, self.requested_port = host, port
        self.handle, self.quick = handle, quick
        self.read_timeout, self.write_timeout = read_timeout, write_timeout
        self.max_connections = max_connections
        self.open: set[_Connection] = set()  # read on the loop's thread only
        self.evicted = 0
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="http-page")
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    def start(self) -> HttpServer:
        """Bind, then serve on a thread of its own (the caller may be running an asyncio loop);
        an error binding (a port in use) is raised here."""
        bound: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, args=(bound,), name="http-endpoints", daemon=True)
        self._thread.start()
        try:
            bound.result()
        except BaseException:
            self._thread.join()
            self._thread = None
            raise
        return self

    def _run(self, bound: Future[None]) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, self.host, self.requested_port, limit=MAX_HEAD, backlog=128)
            )
        except BaseException as exc:  # noqa: BLE001 - handed to start(), which raises it
            self._loop.close()
            bound.set_exception(exc)
            return
        bound.set_result(None)
        self._loop.run_forever()
        self._loop.close()

    def stop(self) -> None:
        if self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._thread = None

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for conn in list(self.open):
            conn.transport.abort()
        await asyncio.sleep(0)  # let their coroutines see it and end

    # -- one connection ----------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        conn = _Connection(writer.transport, loop.time())
        if not self._admit(conn):
            writer.transport.abort()
            return
        try:
            request: Request | None = None
            try:
                async with asyncio.timeout(self.read_timeout):
                    request = await self._read(reader, writer)
            except BadRequest as exc:
                response: Response | None = Response.text(exc.status, f"{exc}\n")
            else:
                conn.phase = QUEUED
                response = await self._answer(request, conn)
            if response is None or conn.evicted:
                return
            conn.phase = WRITING
            writer.transport.set_write_buffer_limits(high=0)  # drain() returns once all is sent
            writer.write(encode(response, with_body=request is None or request.method != "HEAD"))
            async with asyncio.timeout(self.write_timeout):
                await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass  # too slow, gone or evicted: nothing to answer
        except Exception as exc:  # noqa: BLE001 - one client's odd bytes: no traceback per request
            log.debug("http connection dropped: %s: %s", type(exc).__name__, exc)
        finally:
            self.open.discard(conn)
            writer.transport.abort()  # no lingering close on a client that does not read

    def _admit(self, conn: _Connection) -> bool:
        """Make room for ``conn``: evict the oldest connection still sending its request; if none,
        the oldest being slow to take its answer; if none, the oldest complete request waiting
        for a thread. One such always exists while ``max_connections`` exceeds ``threads``."""
        if len(self.open) >= self.max_connections:
            victims = [c for phase in EVICTED_FIRST for c in sorted(self.open, key=_age) if c.phase == phase]
            if not victims:
                return False
            oldest = victims[0]
            oldest.evicted = True
            self.open.discard(oldest)
            oldest.transport.abort()
            self.evicted += 1
        self.open.add(conn)
        return True

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise BadRequest(431, "request head too large") from None
        method, target, version, headers = parse_head(head[:-4])
        size = body_length(headers)
        body = await reader.readexactly(size) if size else b""
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        return Request(method, target, version, headers, body, tuple(peer[:2]), tuple(local[:2]))

    async def _answer(self, request: Request, conn: _Connection) -> Response | None:
        if self.quick(request):
            return self._handled(request)

        def run() -> Response | None:
            if conn.evicted:  # evicted while it waited for a thread: no one to answer
                return None
            conn.phase = HANDLED
            try:
                return self._handled(request)
            finally:
                conn.phase = QUEUED

        return await asyncio.get_running_loop().run_in_executor(self._pool, run)

    def _handled(self, request: Request) -> Response:
        try:
            return self.handle(request)
        except Exception:  # noqa: BLE001 - a broken page must not take the server down
            log.exception("%s %s failed", request.method, request.target)
            return Response.text(500, "internal error\n")


def _age(conn: _Connection) -> float:
    return conn.started
