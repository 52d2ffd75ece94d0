"""Who may use the dashboard, and which POSTs are the user's own.

- Auth: with ``DOCLLM_DASHBOARD_TOKEN`` every request needs it, once through the login form (kept
  in the signed session cookie) or as ``Authorization: Bearer TOKEN``; compared in constant time.
  Without a token the app is served on loopback only (``serve`` refuses other binds), and a
  request must name a loopback host exactly: a page another site rebinds to 127.0.0.1 keeps its
  own name in ``Host`` (``127.attacker.example`` too) and gets nothing.
- CSRF: every form carries a random token kept in the session (signed by the server, cookie
  SameSite=Strict); a POST whose token does not match is refused with 403.
- Every page but the static files is sent ``Cache-Control: no-store``: the pages hold the CSRF
  token and the operator's data, for no shared or disk cache to keep.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from typing import Any

from flask import Flask, Response, abort, redirect, request, session, url_for

LOOPBACK_NAMES = ("localhost", "[::1]")
HOST = re.compile(r"(?P<name>\[[^\]]*\]|[^:\[\]]*)(?::\d{1,5})?")  # name or [v6], then an optional :port
OPEN_ENDPOINTS = ("login", "static")


def secret_key(token: str) -> bytes:
    """Derived from the token, so that every process serving one fleet (workers behind a balancer)
    accepts the same session; without a token, random per process."""
    if token:
        return hmac.new(token.encode(), b"docllm-dashboard-session", hashlib.sha256).digest()
    return secrets.token_bytes(32)


def token_matches(given: str | None, token: str) -> bool:
    return bool(token) and given is not None and hmac.compare_digest(given.encode(), token.encode())


def csrf_token() -> str:
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return str(session["csrf"])


def _bearer() -> str | None:
    header = request.headers.get("Authorization", "")
    return header[7:] if header.startswith("Bearer ") else None


def loopback_host(host: str) -> bool:
    """``localhost``, ``[::1]`` or a dotted quad in 127.0.0.0/8, with or without a port; a name that
    only starts like one (``127.0.0.1.evil.com``) is the attacker's."""
    found = HOST.fullmatch(host)
    name = found["name"].lower() if found else ""
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.IPv4Address(name).is_loopback  # refuses "127.1" and names, unlike a prefix
    except ValueError:
        return False


def install(app: Flask, token: str) -> None:
    app.secret_key = secret_key(token)
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict")
    app.jinja_env.globals["csrf_token"] = csrf_token
    app.jinja_env.globals["auth_required"] = bool(token)

    @app.before_request
    def guard() -> Any:
        if not token and not loopback_host(request.host):
            abort(403, "this dashboard answers requests to localhost only (set DOCLLM_DASHBOARD_TOKEN)")
        authed = session.get("auth") or token_matches(_bearer(), token)
        if token and request.endpoint not in OPEN_ENDPOINTS and not authed:
            if request.method != "GET":
                abort(401, "log in first")
            return redirect(url_for("login", next=request.full_path))
        # A browser never adds the bearer header on its own: a request that carries it is a script's.
        if request.method == "POST" and not token_matches(_bearer(), token):
            given = request.form.get("csrf", "")
            if not hmac.compare_digest(given.encode(), csrf_token().encode()):
                abort(403, "the form's CSRF token is missing or stale: reload the page and try again")
        return None

    @app.after_request
    def no_store(response: Response) -> Response:
        if request.endpoint != "static":
            response.headers["Cache-Control"] = "no-store"
        return response
