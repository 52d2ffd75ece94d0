"""The process's HTTP port (``DOCLLM_METRICS_PORT``): ``/metrics``, ``/healthz`` and ``/readyz``,
and every other path to a WSGI app when one is given (the dashboard, ``DOCLLM_DASHBOARD_ON_WORKER``).

- ``/healthz`` (liveness): 200 while the process's loops come round (no stalled reaper or
  reconciler loop, no dead worker slot); 503 listing the problems. An outage of Redis or the
  database does not fail it: restarting the process would not help.
- ``/readyz`` (readiness): 200 when Redis answers PING and the database ``SELECT 1``; 503 naming
  what failed.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from docllm.logs import log_fields

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
    ):
        self.host, self.requested_port = host, port
        self.registry, self.health, self.checks = registry, health, checks
        self.app = app  # a WSGI app served on every other path
        self.server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None, "not started"
        return self.server.server_address[1]

    def start(self) -> HttpEndpoints:
        self.server = ThreadingHTTPServer((self.host, self.requested_port), _handler(self))
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="http-endpoints", daemon=True).start()
        log_fields(log, logging.INFO, f"metrics listening on {self.host}:{self.port}", host=self.host, port=self.port)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

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


def _probe(check: Callable[[], object]) -> str:
    try:
        check()
    except Exception as exc:  # noqa: BLE001 - any failure means not ready; say which
        text = " ".join(str(exc).split())[:200]
        return re.sub(r"://[^/@\s]*@", "://***@", f"{type(exc).__name__}: {text}")  # no credentials
    return "ok"


def _json(status: int, body: dict[str, Any]) -> tuple[int, str, bytes]:
    return status, "application/json", (json.dumps(body) + "\n").encode()


def _handler(endpoints: HttpEndpoints) -> type[BaseHTTPRequestHandler]:
    pages = {"/metrics": endpoints.metrics, "/healthz": endpoints.healthz, "/readyz": endpoints.readyz}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            page = pages.get(urlsplit(self.path).path)
            if page is None and endpoints.app is not None:
                return self._wsgi()
            if page is None:
                status, kind, body = 404, "text/plain", b"not found: try /metrics, /healthz, /readyz\n"
            else:
                try:
                    status, kind, body = page()
                except Exception:  # noqa: BLE001 - a broken page must not take the server down
                    log.exception("%s failed", self.path)
                    status, kind, body = 500, "text/plain", b"internal error\n"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            if endpoints.app is None:
                self.send_error(405)
            else:
                self._wsgi()

        def _wsgi(self) -> None:
            """This request to the WSGI app, through the standard library's CGI-style handler."""
            from wsgiref.handlers import SimpleHandler

            environ = _environ(self)
            out: Any = self.wfile
            handler = SimpleHandler(self.rfile, out, sys.stderr, environ, multithread=True)
            handler.http_version = "1.0"
            handler.origin_server = True  # it writes the status line itself
            assert endpoints.app is not None
            handler.run(endpoints.app)
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every few seconds: no INFO lines
            log.debug("http %s", format % args)

    return Handler


def _environ(req: BaseHTTPRequestHandler) -> dict[str, Any]:
    """The WSGI environ of a request (what ``wsgiref.simple_server`` builds, for this handler)."""
    path, _, query = req.path.partition("?")
    address: Any = req.server.server_address  # (host, port, ...): an AF_INET(6) server
    host, port = address[0], address[1]
    env: dict[str, Any] = {
        "REQUEST_METHOD": req.command,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote(path, "iso-8859-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": str(host),
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": req.request_version,
        "REMOTE_ADDR": req.client_address[0],
        "CONTENT_TYPE": req.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": req.headers.get("Content-Length", ""),
        "wsgi.url_scheme": "http",
    }
    for key, value in req.headers.items():
        name = "HTTP_" + key.upper().replace("-", "_")
        if name not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
            env[name] = f"{env[name]},{value}" if name in env else value
    return env
