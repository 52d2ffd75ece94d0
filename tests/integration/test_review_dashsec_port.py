"""Hostile review of issue 50, hole 6 (the worker's HTTP port), with real sockets on loopback."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from docllm.runtime.http_endpoints import HttpEndpoints
from docllm.runtime.http_server import THREADS
from tests.support.http_port import connect, held_endpoints

READ_TIMEOUT = 2.0
CAP = 16


@pytest.fixture
def endpoints() -> Iterator[HttpEndpoints]:
    with held_endpoints(READ_TIMEOUT, CAP) as served:
        yield served


def test_a_complete_request_waiting_for_a_thread_is_not_evicted_for_idle_sockets(endpoints: HttpEndpoints):
    """DEPLOY.md: "one more closes the oldest that is still sending or slow to read". A scrape that
    arrived whole and waits for a page thread is neither, yet idle sockets opened after it evict it:
    an attacker opening idle connections at CAP per page-time kills every /metrics and /readyz."""
    busy = [connect(endpoints.port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(THREADS)]
    time.sleep(0.3)  # they hold the page threads
    scrape = connect(endpoints.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # whole, queued
    time.sleep(0.3)
    idle = [connect(endpoints.port) for _ in range(CAP)]  # the attacker's: not a byte sent
    time.sleep(0.3)
    endpoints.release.set()  # type: ignore[attr-defined]
    scrape.settimeout(10)
    try:
        answer = scrape.recv(64)
    except ConnectionResetError:
        answer = b"<reset>"
    for s in busy + idle + [scrape]:
        s.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer


def test_a_bad_content_length_is_a_400_not_a_logged_traceback(endpoints: HttpEndpoints, caplog):
    """'²'.isdigit() is True but int('²') raises: the handler task dies, no answer, and every such
    one-packet request writes an ERROR traceback (an anonymous log flood)."""
    caplog.set_level(logging.ERROR)
    sock = connect(endpoints.port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n")
    sock.settimeout(10)
    try:
        answer = sock.recv(64)
    finally:
        sock.close()
    time.sleep(0.2)
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
