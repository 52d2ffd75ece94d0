"""``docllm dashboard``: serve the app on loopback unless a token is set, with the server of the
worker's HTTP port (``runtime/http_server.py``): idle or slow clients hold no thread, time out,
and cannot fill its connections (docs/DEPLOY.md, Security)."""

from __future__ import annotations

import sys
import threading

from docllm.container import Container
from docllm.entrypoints.output import CommandError
from docllm.settings import is_loopback


def check_bind(host: str, token: str) -> None:
    """Refuse to serve beyond this machine without a token: anyone who reaches the port could
    retry and discard dead letters."""
    if not is_loopback(host) and not token:
        raise CommandError(
            f"refusing to serve the dashboard on {host}: it is not a loopback address and "
            "DOCLLM_DASHBOARD_TOKEN is not set (set it, or bind to 127.0.0.1)"
        )


def serve(c: Container, host: str, port: int) -> int:
    """Serve until the process is stopped (SIGTERM, or Ctrl-C: KeyboardInterrupt to the caller)."""
    from docllm.entrypoints.dashboard.wiring import build_app
    from docllm.runtime.http_server import HttpServer
    from docllm.runtime.wsgi_bridge import call_wsgi

    token = c.settings().dashboard_token
    check_bind(host, token)
    app = build_app(c)
    server = HttpServer(host, port, lambda request: call_wsgi(app, request)).start()
    shown = f"[{host}]" if ":" in host else host
    print(
        f"docllm dashboard on http://{shown}:{server.port}/ ({'token required' if token else 'loopback only'})",
        file=sys.stderr,
    )
    try:
        threading.Event().wait()
    finally:
        server.stop()
    return 0
