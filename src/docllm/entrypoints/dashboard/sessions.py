"""The dashboard's session cookie, signed with a key the server keeps (issue 50).

- The key is ``DashboardSessions.current()``'s: random, made once for the fleet and kept in
  Redis. It used to be derived from the token, so one anonymous ``GET /login`` handed out a
  cookie against which token guesses could be checked offline.
- A logged-in session names the generation in force when it began, the token it was opened with
  (as an HMAC under the server's key: no oracle) and the authority-clock time of its login; it is
  honoured only while that generation is still the fleet's (a logout starts a new one), the token
  is unchanged, and for ``DOCLLM_DASHBOARD_SESSION_SECONDS`` after the login, however it is used.
- The cookie is ``Secure`` whenever the request came over HTTPS (as a trusted proxy says, or
  always with ``DOCLLM_DASHBOARD_HTTPS``), HttpOnly and SameSite=Strict.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

from flask import Flask, g, request, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask.wrappers import Request
from itsdangerous import URLSafeTimedSerializer

from docllm.domain.tasks.ports import DashboardSessions


class ServerKeyedSessions(SecureCookieSessionInterface):
    def __init__(self, store: DashboardSessions, sessionless: tuple[str, ...] = ()):
        self.store, self.sessionless = store, sessionless

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        if request.path in self.sessionless:  # the probe: no Redis read, no cookie
            return self.make_null_session(app)
        return super().open_session(app, request)

    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer | None:
        key, _ = current(self.store)
        return URLSafeTimedSerializer(
            key,
            salt=self.salt,
            serializer=self.serializer,
            signer_kwargs={"key_derivation": self.key_derivation, "digest_method": self.digest_method},
        )

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def current(store: DashboardSessions) -> tuple[bytes, str]:
    """The key and generation, read once per request."""
    if "dashboard_sessions" not in g:
        g.dashboard_sessions = store.current()
    return g.dashboard_sessions


def begin(store: DashboardSessions, token: str, now_ms: int) -> None:
    """A login: a new session (new CSRF token) in the generation in force; whatever the browser
    held before, perhaps planted by someone else, is dropped."""
    session.clear()
    session.update(auth=True, gen=current(store)[1], tok=_token_mark(store, token), since=now_ms)
    session.permanent = True


def alive(store: DashboardSessions, token: str, now: Callable[[], int], lifetime_ms: int) -> bool:
    """Whether this request's session is a login still honoured; a stale one is cleared."""
    if not session.get("auth"):
        return False
    since, mark = session.get("since"), session.get("tok")
    fresh = isinstance(since, int) and 0 <= now() - since < lifetime_ms
    same_token = isinstance(mark, str) and hmac.compare_digest(mark, _token_mark(store, token))
    if fresh and same_token and session.get("gen") == current(store)[1]:
        return True
    session.clear()
    return False


def _token_mark(store: DashboardSessions, token: str) -> str:
    """Which token a session was opened with: a new token ends every session opened with the old."""
    return hmac.new(current(store)[0], token.encode(), hashlib.sha256).hexdigest()[:32]
