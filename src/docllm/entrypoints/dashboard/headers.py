"""Headers every dashboard response carries, and what the app believes about its scheme (issue 50).

- No other page may frame it (CSP ``frame-ancestors 'none'``, ``X-Frame-Options: DENY``): a
  sibling subdomain or another port passes SameSite, and a framed one-click action is a click away.
- Scripts, styles and images come from the dashboard itself (``default-src 'self'``): the
  templates hold no inline script or style (static/live.js, static/style.css).
- ``nosniff``, ``Referrer-Policy: same-origin`` (a task's URL is nobody else's business).
- Behind a TLS proxy (``DOCLLM_DASHBOARD_TRUSTED_PROXIES`` hops, werkzeug's ProxyFix) the app
  believes X-Forwarded-Proto and -For from those hops only; over HTTPS it sends HSTS, and with
  ``DOCLLM_DASHBOARD_HTTPS`` it answers nothing over plain HTTP but the probe (``/healthz``) and
  what comes from this host itself (``kubectl port-forward`` arrives from 127.0.0.1 in the pod;
  browsers keep a Secure cookie for http://127.0.0.1 and localhost).
"""

from __future__ import annotations

import ipaddress

from flask import Flask, Response, abort, request
from werkzeug.middleware.proxy_fix import ProxyFix

CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
HSTS = "max-age=31536000"
FIXED = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def install(app: Flask, https: bool, trusted_proxies: int, probe_path: str) -> None:
    if trusted_proxies:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=trusted_proxies, x_proto=trusted_proxies)  # type: ignore[method-assign]
    app.config.update(SESSION_COOKIE_SECURE=https)

    @app.before_request
    def https_only() -> None:
        if https and not request.is_secure and request.path != probe_path and not _from_this_host():
            abort(403, "this dashboard is served over HTTPS only (DOCLLM_DASHBOARD_HTTPS)")

    @app.after_request
    def secure_headers(response: Response) -> Response:
        response.headers.update(FIXED)
        if request.is_secure:
            response.headers["Strict-Transport-Security"] = HSTS
        if request.endpoint != "static":
            response.headers["Cache-Control"] = "no-store"  # pages hold the CSRF token and the operator's data
        return response


def _from_this_host() -> bool:
    """Whether the TCP peer (before any proxy's word) is a loopback address and no proxy relayed
    the request (a TLS sidecar in the pod says X-Forwarded-Proto: its plain HTTP stays refused)."""
    peer = request.environ.get("werkzeug.proxy_fix.orig", {}).get("REMOTE_ADDR", request.remote_addr)
    if "X-Forwarded-Proto" in request.headers:
        return False
    try:
        return ipaddress.ip_address(peer or "").is_loopback
    except ValueError:
        return False
