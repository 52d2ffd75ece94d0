"""A TCP fault proxy for the tests: loopback "links" in front of Redis, MariaDB or the LLM server,
each with faults a test turns on and off while the programs run.

    with FaultProxy() as proxy:
        link = proxy.link("w1-db", mariadb.host, mariadb.port, protocol="mysql")
        url = mariadb.url_for("db").replace(f":{mariadb.port}/", f":{link.port}/")
        link.latency(200)                          # every reply 200 ms late
        link.drop_reply(mysql_commit("success"))   # the commit lands, its answer never comes
        link.heal()

Faults of a link (each call returns when it is in force):

- ``latency(ms)``: every reply (server to client) is delivered ``ms`` later, so each round trip
  takes that much longer; a change applies to bytes already waiting too.
- ``bandwidth(bytes_per_s)``: each direction is capped at that rate.
- ``blackhole(new=True)``: every open connection stays open and swallows whatever either side
  sends, FIN included (half-open: the client learns nothing until its own timeout fires); with
  ``new`` so do connections made from now on (accepted, never connected upstream).
- ``blackhole_at(match)``: the connection that carries the next request ``match`` accepts goes
  half-open before that request is forwarded (a COMMIT that never arrives, its locks held).
- ``drop_reply(match, then="reset")``: the next request ``match`` accepts is forwarded; when its
  reply arrives (so it was executed) the reply is swallowed and the client's connection reset
  (``then="hang"``: left half-open instead).
- ``reset()``: every open connection is reset (RST); ``refuse()``: new connections are refused
  (nothing listens on the port) until ``refuse(False)``.
- ``heal()``: all of the above off; connections that went half-open are reset (bytes were lost).

``match`` is a predicate on :class:`tests.servers.wire.Request` (``mysql_commit``, ``redis_script``),
and needs the link's ``protocol``. Written here rather than taken from a package: Toxiproxy (Go)
would be one more binary to install and knows no protocol, so it cannot drop the reply of a commit.
One asyncio loop on a daemon thread serves every link of a proxy.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from tests.servers.ports import LOOPBACK
from tests.servers.wire import PROTOCOLS, Match, Request

_EOF = None  # in a pipe: the other side closed; close this one once what came before is delivered


@dataclass
class _Rule:
    match: Match
    action: str  # "drop_reply" | "blackhole"
    then: str = "reset"
    left: int = 1


class _Pipe:
    """One direction of one connection: bytes in order, each after the link's delay for it."""

    def __init__(self, conn: _Conn, writer: asyncio.StreamWriter, delayed: bool):
        self.conn, self.link, self.writer, self.delayed = conn, conn.link, writer, delayed
        self.items: deque[tuple[float, bytes | None]] = deque()
        self.wake = asyncio.Event()

    def put(self, data: bytes | None) -> None:
        self.items.append((asyncio.get_running_loop().time(), data))
        self.wake.set()

    def clear(self) -> None:
        self.items.clear()

    async def run(self) -> None:
        try:
            await self._deliver()
        except (ConnectionError, OSError):
            self.conn.reset()

    async def _deliver(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.items:
                self.wake.clear()
                await self.wake.wait()
                continue
            at, data = self.items[0]
            wait = at + (self.link.latency_s if self.delayed else 0.0) - loop.time()
            if wait > 0:  # the latency may change meanwhile: wait for that too
                changed = self.link.changed
                try:
                    await asyncio.wait_for(changed.wait(), wait)
                except TimeoutError:
                    pass
                continue
            self.items.popleft()
            if data is _EOF:
                self.writer.close()
                self.conn.pipe_ended()
                return
            await self._write(data)

    async def _write(self, data: bytes) -> None:
        rate = self.link.bytes_per_s
        piece = max(1, rate // 20) if rate else len(data)
        for i in range(0, len(data), piece):
            self.writer.write(data[i : i + piece])
            await self.writer.drain()
            if rate:
                await asyncio.sleep(len(data[i : i + piece]) / rate)


class _Conn:
    def __init__(self, link: Link, client: tuple[asyncio.StreamReader, asyncio.StreamWriter]):
        self.link = link
        self.creader, self.cwriter = client
        self.uwriter: asyncio.StreamWriter | None = None
        self.half_open = False
        self.tasks: list[asyncio.Task[None]] = []
        self.pipes: list[_Pipe] = []
        self.ended = 0
        framer, tracker = PROTOCOLS[link.protocol] if link.protocol else (None, None)
        self.up_frames = framer() if framer else None
        self.down_frames = framer() if framer else None
        self.tracker = tracker() if tracker else None

    def go_half_open(self, lose_queued: bool = True) -> None:
        """Nothing read from now on goes anywhere; what waits in the pipes is lost too, unless
        ``lose_queued`` is False."""
        self.half_open = True
        if lose_queued:
            for pipe in self.pipes:
                pipe.clear()

    def pipe_ended(self) -> None:
        self.ended += 1
        if self.ended == 2:  # both sides closed in order: nothing left to reset
            self.link.conns.discard(self)

    def reset(self) -> None:
        for writer in (self.cwriter, self.uwriter):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                try:  # SO_LINGER 0: close() sends RST instead of FIN
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()
        self.link.conns.discard(self)

    async def serve(self, upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
        if upstream is None:  # a new connection into a blackhole: accepted, never answered
            self.half_open = True
            self.tasks = [asyncio.create_task(self._swallow(self.creader))]
            return
        ureader, self.uwriter = upstream
        up, down = _Pipe(self, self.uwriter, delayed=False), _Pipe(self, self.cwriter, delayed=True)
        self.pipes = [up, down]
        self.tasks = [
            asyncio.create_task(self._pump(self.creader, up, requests=True)),
            asyncio.create_task(self._pump(ureader, down, requests=False)),
            asyncio.create_task(up.run()),
            asyncio.create_task(down.run()),
        ]

    async def _swallow(self, reader: asyncio.StreamReader) -> None:
        try:
            while await reader.read(65536):
                pass
        except (ConnectionError, OSError):
            pass

    async def _pump(self, reader: asyncio.StreamReader, pipe: _Pipe, requests: bool) -> None:
        try:
            while data := await reader.read(65536):
                if self.half_open:
                    continue
                data = self._inspect(data, requests)
                if data:
                    pipe.put(data)
            if not self.half_open:  # a half-open connection keeps the other side open
                pipe.put(_EOF)
        except (ConnectionError, OSError):
            if not self.half_open:
                self.reset()

    def _inspect(self, data: bytes, requests: bool) -> bytes:
        """What of ``data`` goes on; applies the link's rules to whole messages."""
        frames = self.up_frames if requests else self.down_frames
        if frames is None or self.tracker is None:
            return data
        out = bytearray()
        for message in frames.feed(data):
            if requests:
                req = self.tracker.request(message)
                rule = self.link.take_rule(req) if req is not None else None
                if rule is not None and rule.action == "blackhole":
                    self.link.stats["blackholed_requests"] += 1
                    self.go_half_open()
                    break
                if req is not None and rule is not None:
                    req.action = rule
            else:
                req = self.tracker.reply(message)
                if req is not None and isinstance(req.action, _Rule):
                    self.link.stats["dropped_replies"] += 1  # it was executed: its reply is here
                    if req.action.then == "reset":
                        asyncio.get_running_loop().call_soon(self.reset)
                    self.go_half_open(lose_queued=False)  # the replies before it still arrive
                    break
            out += message
        return bytes(out)


class Link:
    """One listening port in front of one upstream address."""

    def __init__(self, proxy: FaultProxy, name: str, host: str, port: int, protocol: str | None):
        if protocol is not None and protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {sorted(PROTOCOLS)} or None")
        self.proxy, self.name, self.upstream, self.protocol = proxy, name, (host, port), protocol
        self.host, self.port = LOOPBACK, 0
        self.conns: set[_Conn] = set()
        self.rules: list[_Rule] = []
        self.latency_s = 0.0
        self.bytes_per_s = 0
        self.blackhole_new = False
        self.server: asyncio.Server | None = None
        self.changed = asyncio.Event()
        self.stats = {"connections": 0, "dropped_replies": 0, "blackholed_requests": 0, "resets": 0, "refused": 0}

    # -- faults (called from the test's thread) ---------------------------------------------------
    def latency(self, ms: float) -> None:
        self.proxy.run(self._set(latency_s=ms / 1000.0))

    def bandwidth(self, bytes_per_s: int | None) -> None:
        self.proxy.run(self._set(bytes_per_s=int(bytes_per_s or 0)))

    def blackhole(self, new: bool = True) -> None:
        self.proxy.run(self._blackhole(new))

    def blackhole_at(self, match: Match, times: int = 1) -> None:
        self._need_protocol()
        self.proxy.run(self._add(_Rule(match, "blackhole", left=times)))

    def drop_reply(self, match: Match, times: int = 1, then: str = "reset") -> None:
        self._need_protocol()
        if then not in ("reset", "hang"):
            raise ValueError("then must be 'reset' or 'hang'")
        self.proxy.run(self._add(_Rule(match, "drop_reply", then, times)))

    def reset(self) -> None:
        self.proxy.run(self._reset(only_half_open=False))

    def refuse(self, on: bool = True) -> None:
        self.proxy.run(self._refuse(on))

    def heal(self) -> None:
        self.proxy.run(self._heal())

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _need_protocol(self) -> None:
        if self.protocol is None:
            raise ValueError(f"link {self.name} has no protocol: it cannot tell requests apart")

    # -- on the loop ------------------------------------------------------------------------------
    def take_rule(self, req: Request) -> _Rule | None:
        for rule in self.rules:
            if rule.left > 0 and rule.match(req):
                rule.left -= 1
                return rule
        return None

    async def _set(self, **values: Any) -> None:
        for name, value in values.items():
            setattr(self, name, value)
        self.changed.set()  # wakes the pipes that wait for an earlier latency
        self.changed = asyncio.Event()

    async def _add(self, rule: _Rule) -> None:
        self.rules = [r for r in self.rules if r.left > 0] + [rule]

    async def _blackhole(self, new: bool) -> None:
        self.blackhole_new = new
        for conn in list(self.conns):
            conn.go_half_open()

    async def _reset(self, only_half_open: bool) -> None:
        for conn in list(self.conns):
            if conn.half_open or not only_half_open:
                conn.reset()
                self.stats["resets"] += 1

    async def _refuse(self, on: bool) -> None:
        if on and self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        elif not on and self.server is None:
            await self._listen()

    async def _heal(self) -> None:
        self.rules, self.blackhole_new = [], False
        await self._set(latency_s=0.0, bytes_per_s=0)
        await self._reset(only_half_open=True)
        await self._refuse(False)

    async def _listen(self) -> None:
        self.server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        conn = _Conn(self, (reader, writer))
        self.conns.add(conn)
        if self.blackhole_new:
            await conn.serve(None)
            return
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 10)
        except (OSError, TimeoutError):
            self.stats["refused"] += 1  # the server is down: so is the client's connection
            conn.reset()
            return
        await conn.serve(upstream)

    async def _close(self) -> None:
        if self.server is not None:
            self.server.close()
        for conn in list(self.conns):
            conn.reset()
        await asyncio.sleep(0)  # the cancelled tasks end


class FaultProxy:
    """Links on one event loop, on a daemon thread of the test process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.links: dict[str, Link] = {}

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def link(self, name: str, host: str, port: int, protocol: str | None = None) -> Link:
        """A new link to ``host:port``, listening on a free loopback port (``link.port``)."""

        async def make() -> Link:
            link = Link(self, name, host, port, protocol)
            await link._listen()
            return link

        self.links[name] = link = self.run(make())
        return link

    def heal(self) -> None:
        for link in self.links.values():
            link.heal()

    def close(self) -> None:
        if not self.loop.is_running():
            return
        for link in self.links.values():
            self.run(link._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
