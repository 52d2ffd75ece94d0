"""The process's HTTP port (``DOCLLM_METRICS_PORT``): ``/metrics``, ``/healthz`` and ``/readyz``,
and every other path to a WSGI app when one is given (the dashboard, ``DOCLLM_DASHBOARD_ON_WORKER``).

- ``/healthz`` (liveness): 200 while the process's loops come round (no stalled reaper or
  reconciler loop, no dead worker slot); 503 listing the problems. An outage of Redis or the
  database does not fail it: restarting the process would not help.
- ``/readyz`` (readiness): 200 when Redis answers PING and the database ``SELECT 1``; 503 naming
  what failed.

Served by ``http_server.HttpServer``: read and write timeouts, a cap on open connections, and no
thread held by a client that is slow to send or to read (docs/DEPLOY.md, Security).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from docllm.logs import log_fields
from docllm.runtime.http_messages import PLAIN_GUARDS, Request, Response
from docllm.runtime.http_server import HttpServer
from docllm.runtime.wsgi_bridge import call_wsgi

log = logging.getLogger("docllm.metrics")

Health = Callable[[], tuple[bool, list[str]]]


def readiness_checks(redis_client: Any, engine: Any) -> dict[str, Callable[[], object]]:
    def database() -> None:
        from sqlalchemy import text

        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    return {"redis": redis_client.ping, "database": database}


class HttpEndpoints:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        health: Health,
        checks: Mapping[str, Callable[[], object]],
        app: Callable[..., Any] | None = None,
        **limits: Any,
    ):
        """``limits``: ``http_server.HttpServer``'s keywords (timeouts, the connection cap), for tests."""
        self.host, self.requested_port = host, port
        self.registry, self.health, self.checks = registry, health, checks
        self.app = app  # a WSGI app served on every other path
        self.limits = limits
        self.server: HttpServer | None = None
        self.pages = {"/metrics": self.metrics, "/healthz": self.healthz, "/readyz": self.readyz}

    @property
    def port(self) -> int:
        assert self.server is not None, "not started"
        return self.server.port

    def start(self) -> HttpEndpoints:
        # /healthz is answered on the server's loop, never queued behind a slow page: a liveness
        # probe must not fail because /readyz waits on a database that does not answer.
        self.server = HttpServer(self.host, self.requested_port, self.handle, _is_health, **self.limits).start()
        log_fields(log, logging.INFO, f"metrics listening on {self.host}:{self.port}", host=self.host, port=self.port)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def handle(self, request: Request) -> Response:
        page = self.pages.get(_path(request))
        if page is None and self.app is not None:
            return call_wsgi(self.app, request)
        if request.method not in ("GET", "HEAD"):
            return Response.text(405, "method not allowed\n")
        if page is None:
            return Response.text(404, "not found: try /metrics, /healthz, /readyz\n")
        status, kind, body = page()
        return Response(status, [("Content-Type", kind), *PLAIN_GUARDS], body)

    # -- the three pages -----------------------------------------------------------------------
    def metrics(self) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    def healthz(self) -> tuple[int, str, bytes]:
        ok, problems = self.health()
        return _json(200 if ok else 503, {"status": "ok" if ok else "unhealthy", "problems": problems})

    def readyz(self) -> tuple[int, str, bytes]:
        results = {name: _probe(check) for name, check in self.checks.items()}
        failed = sorted(name for name, result in results.items() if result != "ok")
        body = {"status": "not ready: " + ", ".join(failed) if failed else "ready", "checks": results}
        return _json(503 if failed else 200, body)


def _is_health(request: Request) -> bool:
    return request.method in ("GET", "HEAD") and _path(request) == "/healthz"


def _path(request: Request) -> str:
    return urlsplit(request.target).path


def _probe(check: Callable[[], object]) -> str:
    try:
        check()
    except Exception as exc:  # noqa: BLE001 - any failure means not ready; say which
        text = " ".join(str(exc).split())[:200]
        return re.sub(r"://[^/@\s]*@", "://***@", f"{type(exc).__name__}: {text}")  # no credentials
    return "ok"


def _json(status: int, body: dict[str, Any]) -> tuple[int, str, bytes]:
    return status, "application/json", (json.dumps(body) + "\n").encode()
