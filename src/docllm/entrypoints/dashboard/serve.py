"""``docllm dashboard``: serve the app with waitress, on loopback unless a token is set."""

from __future__ import annotations

import sys

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
    import waitress  # type: ignore[import-untyped]

    from docllm.entrypoints.dashboard.wiring import build_app

    token = c.settings().dashboard_token
    check_bind(host, token)
    app = build_app(c)
    shown = f"[{host}]" if ":" in host else host
    print(
        f"docllm dashboard on http://{shown}:{port}/ ({'token required' if token else 'loopback only'})",
        file=sys.stderr,
    )
    waitress.serve(app, host=host, port=port, threads=4, ident="docllm")
    return 0
