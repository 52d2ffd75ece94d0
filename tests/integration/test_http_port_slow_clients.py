"""The worker's HTTP port against clients that connect and then say little or nothing (issue 50,
hole 6), with real sockets on loopback: an idle or half-sent connection holds no thread and is
cut at the read deadline, the connections held at once are capped (the oldest idle one goes), and
/healthz keeps answering while an attacker holds many connections or every page thread is busy."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from docllm.runtime.http_endpoints import HttpEndpoints
from docllm.runtime.http_server import MAX_HEAD, THREADS
from tests.support.http_port import connect, held_endpoints

READ_TIMEOUT = 1.0  # short, so that the test sees the deadline; the waits below derive from it
CAP = 32
ATTACKERS = 125


@pytest.fixture
def endpoints() -> Iterator[HttpEndpoints]:
    with held_endpoints(READ_TIMEOUT, CAP) as served:
        yield served


def healthz(port: int) -> tuple[int, float]:
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as reply:
        return reply.status, time.monotonic() - started


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_and_half_sent_connections_hold_no_thread_and_are_capped(endpoints: HttpEndpoints):
    before = threading.active_count()
    held = []
    for i in range(ATTACKERS):  # idle ones and ones that stop in the middle of their head
        held.append(connect(endpoints.port, b"" if i % 2 else b"GET /healthz HTTP/1.1\r\nHost: x\r\n"))
    status, took = healthz(endpoints.port)
    assert status == 200 and took < READ_TIMEOUT  # answered at once, not after the attackers' deadline
    assert threading.active_count() - before <= THREADS  # at most the page pool, whatever the attackers hold
    assert endpoints.server is not None and len(endpoints.server.open) <= CAP
    # The oldest were evicted to make room: at least all but CAP of them are closed already.
    evicted = sum(closed_by_server(s, 0.05) for s in held)
    assert evicted >= ATTACKERS - CAP
    for s in held:
        s.close()


def test_a_connection_that_does_not_finish_its_request_is_cut_at_the_read_deadline(endpoints: HttpEndpoints):
    idle = connect(endpoints.port)
    half = connect(endpoints.port, b"GET /metrics HTTP/1.1\r\n")
    trickle = connect(endpoints.port)
    started = time.monotonic()
    for byte in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"x" * 100:  # a byte every 50 ms: each read is quick
        if time.monotonic() - started > READ_TIMEOUT * 3:
            break
        try:
            trickle.send(bytes([byte]))
        except OSError:
            break
        time.sleep(0.05)
    assert closed_by_server(trickle, READ_TIMEOUT * 3)
    assert time.monotonic() - started < READ_TIMEOUT * 3  # a deadline for the whole head, not per read
    assert closed_by_server(idle, READ_TIMEOUT * 3) and closed_by_server(half, READ_TIMEOUT * 3)


def test_healthz_answers_while_every_page_thread_is_busy(endpoints: HttpEndpoints):
    slow = [connect(endpoints.port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(THREADS * 3)]
    time.sleep(0.2)  # the first THREADS of them hold the page threads
    status, took = healthz(endpoints.port)
    assert status == 200 and took < READ_TIMEOUT
    endpoints.release.set()  # type: ignore[attr-defined]
    for s in slow:
        s.settimeout(10)
        assert s.recv(64).startswith(b"HTTP/1.1 200"), "a queued request is answered once a thread is free"
        s.close()


def test_a_head_too_large_or_chunked_is_refused(endpoints: HttpEndpoints):
    big = connect(endpoints.port, b"GET /healthz HTTP/1.1\r\nX: " + b"x" * MAX_HEAD + b"\r\n\r\n")
    assert big.recv(64).startswith(b"HTTP/1.1 431")
    chunked = connect(endpoints.port, b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert chunked.recv(64).startswith(b"HTTP/1.1 501")
    for s in (big, chunked):
        s.close()


def test_a_large_answer_arrives_whole():
    body = bytes(range(256)) * 8192  # 2 MiB: far beyond the transport's write buffer

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return [body]

    served = HttpEndpoints("127.0.0.1", 0, CollectorRegistry(), lambda: (True, []), {}, app).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/big", timeout=10) as reply:
            assert reply.read() == body
    finally:
        served.stop()


def test_the_port_own_answers_forbid_sniffing_and_framing(endpoints: HttpEndpoints):
    for path in ("/healthz", "/metrics", "/nothing"):
        conn = connect(endpoints.port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = conn.recv(4096).decode("latin-1")
        conn.close()
        assert "X-Content-Type-Options: nosniff" in head and "X-Frame-Options: DENY" in head, path
        assert "frame-ancestors 'none'" in head, path
