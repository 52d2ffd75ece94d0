"""The worker's HTTP port on loopback for the tests that attack it with real sockets: endpoints whose
/readyz check holds a page thread until released (a database that is slow), and a raw client."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry

from docllm.runtime.http_endpoints import HttpEndpoints


@contextmanager
def held_endpoints(read_timeout: float, max_connections: int) -> Iterator[HttpEndpoints]:
    """Served on a free port; ``served.release.set()`` lets the held /readyz requests answer."""
    release = threading.Event()
    checks = {"slow": lambda: release.wait(30)}  # /readyz holds a page thread until released
    served = HttpEndpoints(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        lambda: (True, []),
        checks,
        read_timeout=read_timeout,
        max_connections=max_connections,
    ).start()
    served.release = release  # type: ignore[attr-defined]
    try:
        yield served
    finally:
        release.set()
        served.stop()


def connect(port: int, send: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if send:
        sock.sendall(send)
    return sock
