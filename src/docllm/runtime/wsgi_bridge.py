"""One request of the process's port (``http_server.Request``) through a WSGI app, answered whole
(the dashboard's pages are small; ``DOCLLM_DASHBOARD_ON_WORKER``)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from docllm.runtime.http_messages import Request, Response


def call_wsgi(app: Callable[..., Any], request: Request) -> Response:
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [(status, headers)]
        return chunks.append

    chunks: list[bytes] = []
    result = app(environ(request), start_response)
    try:
        chunks.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    assert started, "the WSGI app answered without start_response"
    status, headers = started[0]
    return Response(int(status.split(" ", 1)[0]), headers, b"".join(chunks))


def environ(req: Request) -> dict[str, Any]:
    """The WSGI environ of a request (what ``wsgiref.simple_server`` builds). The scheme is always
    http: a TLS proxy in front says otherwise in X-Forwarded-Proto, believed only by the app and
    only when told to (DOCLLM_DASHBOARD_TRUSTED_PROXIES)."""
    path, _, query = req.target.partition("?")
    env: dict[str, Any] = {
        "REQUEST_METHOD": req.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": unquote(path, "iso-8859-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": str(req.server[0]),
        "SERVER_PORT": str(req.server[1]),
        "SERVER_PROTOCOL": req.version,
        "REMOTE_ADDR": req.client[0],
        "REMOTE_PORT": str(req.client[1]),
        "CONTENT_TYPE": req.header("Content-Type"),
        "CONTENT_LENGTH": req.header("Content-Length"),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(req.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for key, value in req.headers:
        name = "HTTP_" + key.upper().replace("-", "_")
        if name not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
            env[name] = f"{env[name]},{value}" if name in env else value
    return env
