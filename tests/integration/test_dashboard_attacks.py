"""The six holes of issue 50, each tried as an attacker on loopback would, each refused: an open
redirect after login, a session that outlives its logout, cookies without Secure behind a TLS
proxy, an offline oracle for the token (and a weak token, and no throttle), framing, and the worker
port's slow clients (that one in test_http_port_slow_clients.py). Real Redis and MariaDB."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature, URLSafeTimedSerializer
from prometheus_client import CollectorRegistry

from docllm.entrypoints.cli import main
from docllm.entrypoints.dashboard.app import create_app
from docllm.entrypoints.dashboard.security import MAX_FAILURES, Access
from docllm.runtime.http_endpoints import HttpEndpoints
from docllm.settings import Settings, SettingsError
from tests.integration.test_dashboard import TOKEN, World, csrf_of, world  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(world: World) -> World:  # noqa: F811 - test_dashboard's fixture: tasks done, dead, waiting
    return world


def from_address(app: Any, address: str = "127.0.0.1") -> Any:
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def logged_in(app: Any) -> Any:
    client = app.test_client()
    form = csrf_of(client.get("/login").get_data(as_text=True))
    assert client.post("/login", data={"csrf": form, "token": TOKEN}).status_code == 302
    return client


# -- 1. the login's `next` ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/%09/evil.example/login",  # the TAB a browser drops: //evil.example/login
        "/%0d%0a/evil.example/",
        "//evil.example/",
        "/%5Cevil.example/",  # a backslash a browser reads as a slash
        "%5C%5Cevil.example",
        "https://evil.example/",
        "http:/evil.example",
        "%20//evil.example",
        "javascript:alert(1)",
        "evil.example/login",
    ],
)
def test_the_login_never_sends_the_browser_off_the_site(site: World, target: str):
    client = create_app(site.sources, token=TOKEN).test_client()
    form = csrf_of(client.get("/login").get_data(as_text=True))
    answer = client.post(f"/login?next={target}", data={"csrf": form, "token": TOKEN})
    assert answer.status_code == 302 and answer.headers["Location"] == "/", answer.headers["Location"]


def test_the_login_keeps_a_next_that_is_a_path_here(site: World):
    client = create_app(site.sources, token=TOKEN).test_client()
    answer = client.get("/tasks?status=failed")
    assert answer.status_code == 302
    login = answer.headers["Location"]  # /login?next=/tasks?status%3Dfailed
    form = csrf_of(client.get(login).get_data(as_text=True))
    done = client.post(login, data={"csrf": form, "token": TOKEN})
    assert done.headers["Location"] == "/tasks?status=failed"
    parts = urlsplit(done.headers["Location"])
    assert not parts.scheme and not parts.netloc


# -- 2. sessions the server ends ------------------------------------------------------------------


def test_a_cookie_copied_before_logout_reads_and_posts_nothing_after_it(site: World):
    app = create_app(site.sources, token=TOKEN)
    operator = logged_in(app)
    page = operator.get("/dead").get_data(as_text=True)
    stolen = operator.get_cookie("session")
    assert stolen is not None
    thief = app.test_client()
    thief.set_cookie("session", stolen.value)
    assert thief.get("/dead").status_code == 200  # the copy works while the session lives

    assert operator.post("/logout", data={"csrf": csrf_of(page)}).status_code == 302
    assert thief.get("/dead").status_code == 302  # to the login
    answer = thief.post(f"/dead/{site.dead}/retry", data={"csrf": csrf_of(page)})
    assert answer.status_code == 401
    assert site.sources.queue.stats().dead == 1  # nothing was retried


def test_a_login_starts_a_new_session_and_ends_after_its_lifetime(site: World):
    shift = [0]

    class Later:  # the queue, its authority clock moved on by shift[0] ms
        def __getattr__(self, name: str) -> Any:
            return getattr(site.sources.queue, name)

        def now_ms(self) -> int:
            return site.sources.queue.now_ms() + shift[0]

    access = Access(token=TOKEN, session_seconds=600)
    app = create_app(replace(site.sources, queue=Later()), access=access)
    client = app.test_client()
    before = csrf_of(client.get("/login").get_data(as_text=True))
    planted = client.get_cookie("session")
    assert planted is not None
    assert client.post("/login", data={"csrf": before, "token": TOKEN}).status_code == 302
    after = client.get_cookie("session")
    assert after is not None and after.value != planted.value
    assert csrf_of(client.get("/dead").get_data(as_text=True)) != before  # what the browser held is dropped
    assert after.expires is not None  # the browser forgets it too

    shift[0] = 599_000
    assert client.get("/").status_code == 200
    shift[0] = 600_000  # used all along, refreshed at every page: still ends at its lifetime
    assert client.get("/").status_code == 302


# -- 3. TLS: Secure cookies, HSTS, trusted proxies only ------------------------------------------

HTTPS = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}


def _cookie_header(answer: Any) -> str:
    cookies = answer.headers.getlist("Set-Cookie")
    assert cookies, "no cookie set"
    return cookies[0]


def test_behind_a_trusted_tls_proxy_the_cookie_is_secure_and_hsts_is_sent(site: World):
    client = create_app(site.sources, access=Access(token=TOKEN, trusted_proxies=1)).test_client()
    answer = client.get("/login", headers=HTTPS)
    assert "; Secure" in _cookie_header(answer) and "HttpOnly" in _cookie_header(answer)
    assert answer.headers["Strict-Transport-Security"].startswith("max-age=")
    plain = create_app(site.sources, access=Access(token=TOKEN, trusted_proxies=1)).test_client().get("/login")
    assert "Strict-Transport-Security" not in plain.headers  # a plain HTTP answer cannot set it


def test_forwarded_headers_are_believed_only_from_trusted_proxies(site: World):
    client = create_app(site.sources, access=Access(token=TOKEN)).test_client()
    answer = client.get("/login", headers=HTTPS)  # anyone can send the header: not believed
    assert "Strict-Transport-Security" not in answer.headers and "Secure" not in _cookie_header(answer)
    form = csrf_of(answer.get_data(as_text=True))
    for _ in range(MAX_FAILURES):  # X-Forwarded-For does not spread the throttle over made-up addresses
        client.post("/login", data={"csrf": form, "token": "x" * 40}, headers={"X-Forwarded-For": f"10.0.0.{_}"})
    assert client.post("/login", data={"csrf": form, "token": TOKEN}).status_code == 429


def test_https_only_refuses_plain_http_and_always_marks_the_cookie_secure(site: World):
    access = Access(token=TOKEN, https=True, trusted_proxies=1)
    app = create_app(site.sources, access=access)
    client = from_address(app, "10.0.0.5")
    assert client.get("/login").status_code == 403  # plain HTTP: the token would travel in clear
    relayed = from_address(app, "127.0.0.1")  # a TLS sidecar relaying plain HTTP says so
    assert relayed.get("/login", headers={"X-Forwarded-Proto": "http"}).status_code == 403
    answer = client.get("/login", headers=HTTPS)
    assert answer.status_code == 200 and "; Secure" in _cookie_header(answer)
    # kubectl port-forward arrives from 127.0.0.1 in the pod, with no proxy's header: served
    # (browsers keep a Secure cookie for http://127.0.0.1), and the kubelet's probe is answered.
    tunnel = from_address(app, "127.0.0.1").get("/login")
    assert tunnel.status_code == 200 and "; Secure" in _cookie_header(tunnel)
    assert client.get("/healthz").status_code == 200
    with pytest.raises(SettingsError, match="DOCLLM_DASHBOARD_TRUSTED_PROXIES"):
        Settings.from_env({"DOCLLM_DASHBOARD_HTTPS": "1"})  # it could never see HTTPS
    s = Settings.from_env({"DOCLLM_DASHBOARD_HTTPS": "1", "DOCLLM_DASHBOARD_TRUSTED_PROXIES": "1"})
    assert s.dashboard_https and s.dashboard_trusted_proxies == 1


# -- 4. the token: strong, not the cookie's key, throttled ---------------------------------------


@pytest.mark.parametrize(
    "token",
    ["x", "s3cret-token", "CHANGE-ME-dashboard-token", "CHANGE-ME-dashboard-token-0123456789", "a" * 40, "0" * 64],
)
def test_a_short_or_placeholder_token_is_refused_at_start_with_one_line(token: str, monkeypatch, capsys):
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"DOCLLM_DASHBOARD_TOKEN": token})
    message = str(refused.value)
    shown = len(token) > 3 and token in message  # "x" is in any sentence
    assert message.startswith("DOCLLM_DASHBOARD_TOKEN=<hidden>") and "\n" not in message and not shown
    monkeypatch.setenv("DOCLLM_DASHBOARD_TOKEN", token)
    monkeypatch.setenv("DOCLLM_REDIS_URL", "redis://127.0.0.1:1/0")  # never reached: refused first
    with pytest.raises(SystemExit) as stopped:
        main(["dashboard", "--host", "0.0.0.0", "--port", "0"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "DOCLLM_DASHBOARD_TOKEN" in err and len(err.splitlines()) == 1 and (len(token) < 4 or token not in err)


def test_the_shipped_kubernetes_secret_examples_are_refused_as_they_are():
    for example in (ROOT / "deploy" / "kubernetes").rglob("secret.example.yaml"):
        found = re.search(r"^\s*dashboard-token:\s*(\S+)", example.read_text(), re.M)
        assert found, example
        with pytest.raises(SettingsError, match="DOCLLM_DASHBOARD_TOKEN"):
            Settings.from_env({"DOCLLM_DASHBOARD_TOKEN": found.group(1)})


def test_an_anonymous_cookie_is_no_oracle_for_the_token(site: World):
    client = create_app(site.sources, token=TOKEN).test_client()
    client.get("/login")
    cookie = client.get_cookie("session")
    assert cookie is not None
    flask_way = SecureCookieSessionInterface()

    def verifies(key: bytes) -> bool:
        signer = URLSafeTimedSerializer(
            key,
            salt=flask_way.salt,
            serializer=flask_way.serializer,
            signer_kwargs={"key_derivation": "hmac", "digest_method": hashlib.sha1},
        )
        try:
            signer.loads(cookie.value)
        except BadSignature:
            return False
        return True

    assert site.sources.sessions is not None
    assert verifies(site.sources.sessions.current()[0])  # the check can tell: the server's key signs it
    derived = hmac.new(TOKEN.encode(), b"docllm-dashboard-session", hashlib.sha256).digest()
    for guess in (derived, TOKEN.encode(), hashlib.sha256(TOKEN.encode()).digest()):
        assert not verifies(guess)  # knowing (or guessing) the token does not verify the cookie


def test_wrong_tokens_are_throttled_per_client_the_right_one_too(site: World):
    app = create_app(site.sources, token=TOKEN)
    attacker = app.test_client()
    form = csrf_of(attacker.get("/login").get_data(as_text=True))
    for i in range(MAX_FAILURES):
        assert attacker.post("/login", data={"csrf": form, "token": f"guess-{i:034d}"}).status_code == 401
    answer = attacker.post("/login", data={"csrf": form, "token": TOKEN})
    assert answer.status_code == 429  # refused before any comparison: no oracle either way
    assert attacker.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 429
    # another address is not locked out
    operator = from_address(app, "10.1.2.3")
    assert operator.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_wrong_bearer_tokens_count_as_failures(site: World):
    client = from_address(create_app(site.sources, token=TOKEN), "10.4.5.6")
    for i in range(MAX_FAILURES):
        assert client.get("/", headers={"Authorization": f"Bearer guess-{i:034d}"}).status_code == 302
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 429


# -- 5. framing, sniffing, referrers: on every answer ---------------------------------------------


def _assert_guarded(headers: Any, what: str) -> None:
    csp = headers.get("Content-Security-Policy", "")
    assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, what
    assert headers.get("X-Frame-Options") == "DENY", what
    assert headers.get("X-Content-Type-Options") == "nosniff", what
    assert headers.get("Referrer-Policy") == "same-origin", what


def test_every_answer_forbids_framing_and_sniffing(site: World):
    app = create_app(site.sources, token=TOKEN)
    anonymous = app.test_client()
    answers = {
        "login": anonymous.get("/login"),
        "redirect to login": anonymous.get("/tasks"),
        "401": anonymous.post("/dead/retry-all"),
        "static css": anonymous.get("/static/style.css"),
        "static js": anonymous.get("/static/live.js"),
    }
    client = logged_in(app)
    answers |= {
        "overview": client.get("/"),
        "task": client.get(f"/tasks/{site.done}"),
        "404": client.get("/nothing"),
        "405": client.get("/dead/retry-all"),
        "403 csrf": client.post("/dead/retry-all", data={"csrf": "forged"}),
    }
    for what, answer in answers.items():
        _assert_guarded(answer.headers, what)
    assert answers["405"].status_code == 405 and answers["403 csrf"].status_code == 403
    no_token = create_app(site.sources).test_client()
    _assert_guarded(no_token.get("/", headers={"Host": "evil.example"}).headers, "403 rebinding")


def test_the_pages_need_nothing_the_policy_forbids(site: World):
    """No inline script, style or event handler in any page: the CSP would block it (the
    browser test runs live.js under the policy)."""
    client = logged_in(create_app(site.sources, token=TOKEN))
    for path in ("/", "/tasks", f"/tasks/{site.done}", "/dead", "/workers", "/llm", "/batches", "/login"):
        html = client.get(path).get_data(as_text=True)
        assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", html)), path
        assert "<style" not in html and not re.search(r"\sstyle=", html), path
        assert not re.search(r"\son[a-z]+=", html), path


def test_the_worker_port_serves_the_dashboard_with_its_guards(site: World):
    """As an attacker on loopback: real sockets to the worker's port, the dashboard mounted."""
    app = create_app(site.sources, access=Access(token=TOKEN, trusted_proxies=1))
    endpoints = HttpEndpoints("127.0.0.1", 0, CollectorRegistry(), lambda: (True, []), {}, app).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", endpoints.port, timeout=10)
        conn.request("GET", "/login?next=" + quote("/\t/evil.example/login"), headers=HTTPS)
        answer = conn.getresponse()
        answer.read()
        _assert_guarded(answer.headers, "login on the worker port")
        assert "; Secure" in answer.headers["Set-Cookie"] and "Strict-Transport-Security" in answer.headers
        conn = http.client.HTTPConnection("127.0.0.1", endpoints.port, timeout=10)
        conn.request("GET", "/dead")
        refused = conn.getresponse()
        assert refused.status == 302 and refused.headers["Location"].startswith("/login")
    finally:
        endpoints.stop()


def test_a_new_token_ends_the_sessions_opened_with_the_old_one(site: World):
    operator = logged_in(create_app(site.sources, token=TOKEN))
    cookie = operator.get_cookie("session")
    assert cookie is not None and operator.get("/").status_code == 200
    rotated = create_app(site.sources, token=TOKEN[::-1]).test_client()  # the next deployment's
    rotated.set_cookie("session", cookie.value)
    assert rotated.get("/").status_code == 302


@pytest.mark.parametrize(
    "addresses, other",
    [
        ([f"127.0.{i}.{i + 1}" for i in range(MAX_FAILURES)] + ["::1", "::ffff:127.9.9.9"], "10.0.0.9"),
        ([f"2001:db8:1:2::{i:x}" for i in range(1, MAX_FAILURES + 2)], "2001:db8:1:3::1"),
    ],
)
def test_rotating_addresses_of_one_host_does_not_escape_the_throttle(site: World, addresses, other):
    """An attacker on the machine can send from any of 127.0.0.0/8 (and ::1); one IPv6 host from
    any address of its /64: each set counts as one client."""
    app = create_app(site.sources, token=TOKEN)
    for i, address in enumerate(addresses[:MAX_FAILURES]):
        assert from_address(app, address).get("/", headers={"Authorization": f"Bearer g-{i:034d}"}).status_code == 302
    for address in addresses[MAX_FAILURES:]:
        assert from_address(app, address).get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 429
    assert from_address(app, other).get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_probe_needs_no_token_no_https_no_session_and_tells_nothing(site: World):
    app = create_app(site.sources, access=Access(token=TOKEN, https=True, trusted_proxies=1))
    kubelet = from_address(app, "10.244.0.1")
    answer = kubelet.get("/healthz", headers={"Host": "10.244.1.7:8765"})
    assert answer.status_code == 200 and answer.get_data() == b"ok\n"
    assert not answer.headers.getlist("Set-Cookie")  # no session: no Redis read either
    _assert_guarded(answer.headers, "probe")
    no_token = create_app(site.sources).test_client()
    assert no_token.get("/healthz", headers={"Host": "evil.example"}).get_data() == b"ok\n"

    class RedisDown:  # an outage is no reason for the kubelet to restart the dashboard
        def __getattr__(self, name: str) -> Any:
            raise ConnectionError("redis is down")

    down = create_app(replace(site.sources, sessions=RedisDown()), token=TOKEN)
    assert from_address(down, "10.244.0.1").get("/healthz").status_code == 200
