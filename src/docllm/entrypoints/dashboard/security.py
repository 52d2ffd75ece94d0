"""Who may use the dashboard, and which POSTs are the user's own (docs/DEPLOY.md, Security).

- Auth: with ``DOCLLM_DASHBOARD_TOKEN`` every request needs it, once through the login form (a
  session the server can end: ``sessions.py``) or as ``Authorization: Bearer TOKEN``; compared
  in constant time. A client with too many wrong tokens in a minute is refused (429) before any
  comparison, the right token included (``throttle_key``: who counts as one client). Without a
  token the app is served on loopback only (``serve`` refuses other binds), and a request must
  name a loopback host exactly: a page another site rebinds to 127.0.0.1 keeps its own name in
  ``Host`` (``127.attacker.example`` too) and gets nothing.
- CSRF: every form carries a random token kept in the session (signed by the server, cookie
  SameSite=Strict); a POST whose token does not match is refused with 403.
- Headers, HTTPS and proxies: ``headers.py``.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, abort, g, redirect, request, session, url_for

from docllm.domain.tasks.ports import DashboardSessions
from docllm.entrypoints.dashboard import headers, sessions
from docllm.settings import dashboard_token_problem

LOOPBACK_NAMES = ("localhost", "[::1]")
HOST = re.compile(r"(?P<name>\[[^\]]*\]|[^:\[\]]*)(?::\d{1,5})?")  # name or [v6], then an optional :port
OPEN_ENDPOINTS = ("login", "static")
PROBE_PATH = "/healthz"
MAX_FAILURES = 10  # wrong tokens from one client per window (DashboardSessions' window: a minute)


@dataclass(frozen=True)
class Access:
    """The dashboard's guards, as the settings give them (``DOCLLM_DASHBOARD_*``)."""

    token: str = ""
    session_seconds: float = 8 * 3600.0
    https: bool = False
    trusted_proxies: int = 0


class Guard:
    def __init__(self, access: Access, store: DashboardSessions | None, now_ms: Callable[[], int]):
        if access.token and store is None:
            raise ValueError("a dashboard with a token needs a session store (DashboardSessions)")
        self.access, self.store, self.now_ms = access, store, now_ms

    def logged_in(self) -> bool:
        lifetime_ms = int(self.access.session_seconds * 1000)
        return self.store is not None and sessions.alive(self.store, self.access.token, self.now_ms, lifetime_ms)

    def check_token(self, given: str | None) -> bool:
        """Compare a token a client gave, throttled per client; a wrong one is counted."""
        assert self.store is not None
        client = throttle_key(request.remote_addr or "")
        if self.store.failures(client) >= MAX_FAILURES:
            abort(429, "too many wrong tokens from this address: wait a minute")
        if token_matches(given, self.access.token):
            return True
        self.store.fail(client)
        return False

    def begin(self) -> None:
        assert self.store is not None
        sessions.begin(self.store, self.access.token, self.now_ms())

    def end_all(self) -> None:
        if self.store is not None:
            self.store.end_all()
        session.clear()


def throttle_key(address: str) -> str:
    """Whose wrong tokens these are: one address, but every loopback address is one client (an
    attacker on the machine may use any of 127.0.0.0/8) and an IPv6 address counts by its /64 (what
    one host is usually given)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address or "?"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network(f"{ip}/64", strict=False))
    return str(ip)


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


def install(app: Flask, access: Access, store: DashboardSessions | None, now_ms: Callable[[], int]) -> Guard:
    problem = dashboard_token_problem(access.token)
    if problem:
        raise ValueError(f"DOCLLM_DASHBOARD_TOKEN {problem}")
    guard = Guard(access, store, now_ms)
    headers.install(app, access.https, access.trusted_proxies, PROBE_PATH)
    if store is not None:
        app.session_interface = sessions.ServerKeyedSessions(store, sessionless=(PROBE_PATH,))
    else:  # loopback only, no token: the cookie holds a CSRF token and flashes, nothing to log into
        app.secret_key = secrets.token_bytes(32)
    app.config.update(
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        PERMANENT_SESSION_LIFETIME=int(access.session_seconds),
    )
    app.jinja_env.globals["csrf_token"] = csrf_token
    app.jinja_env.globals["auth_required"] = bool(access.token)

    @app.before_request
    def guard_request() -> Any:
        if request.path == PROBE_PATH:
            return None
        token = access.token
        if not token and not loopback_host(request.host):
            abort(403, "this dashboard answers requests to localhost only (set DOCLLM_DASHBOARD_TOKEN)")
        # A browser never adds the bearer header on its own: a request that carries it is a script's.
        g.bearer = bool(token) and _bearer() is not None and guard.check_token(_bearer())
        if token and request.endpoint not in OPEN_ENDPOINTS and not (g.bearer or guard.logged_in()):
            if request.method != "GET":
                abort(401, "log in first")
            return redirect(url_for("login", next=request.full_path))
        if request.method == "POST" and not g.bearer:
            given = request.form.get("csrf", "")
            if not hmac.compare_digest(given.encode(), csrf_token().encode()):
                abort(403, "the form's CSRF token is missing or stale: reload the page and try again")
        return None

    return guard
