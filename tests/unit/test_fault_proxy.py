"""The test suite's TCP fault proxy (tests/servers/fault_proxy.py) against an echo server on
loopback, and its reading of the MySQL and RESP protocols (tests/servers/wire.py) on crafted bytes."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tests.servers.fault_proxy import FaultProxy, Link
from tests.servers.wire import MySQLPackets, MySQLTracker, RedisTracker, RespMessages, mysql_commit, redis_script


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    yield str(host), int(port)
    server.shutdown()
    server.server_close()


@pytest.fixture
def link(echo: tuple[str, int]) -> Iterator[Link]:
    with FaultProxy() as proxy:
        yield proxy.link("echo", *echo)


def _connect(link: Link, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection((link.host, link.port), timeout=timeout)


def _round_trip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_bytes_pass_both_ways_and_latency_delays_each_reply(link: Link) -> None:
    with _connect(link) as sock:
        assert _round_trip(sock, b"hello") == b"hello"
        link.latency(150)
        began = time.monotonic()
        assert _round_trip(sock, b"x" * 100_000) == b"x" * 100_000
        assert time.monotonic() - began >= 0.14
        link.latency(5000)
        sock.sendall(b"held")
        time.sleep(0.1)
        link.latency(0)  # what waits is released at once, not 5 s later
        began = time.monotonic()
        assert _round_trip(sock, b"") == b"" and sock.recv(4) == b"held"
        assert time.monotonic() - began < 1.0


def test_bandwidth_caps_each_direction(link: Link) -> None:
    link.bandwidth(200_000)
    with _connect(link, timeout=5) as sock:
        began = time.monotonic()
        assert _round_trip(sock, b"y" * 60_000) == b"y" * 60_000
        assert time.monotonic() - began >= 0.25  # 60 kB at 200 kB/s is 0.3 s one way


def test_blackhole_keeps_connections_open_and_swallows_bytes_until_healed(link: Link) -> None:
    before = _connect(link)
    assert _round_trip(before, b"a") == b"a"
    link.blackhole()
    after = _connect(link)  # accepted: a half-open peer looks alive
    for sock in (before, after):
        sock.sendall(b"lost")
        sock.settimeout(0.3)  # short only where the timeout is the expected end
        with pytest.raises(TimeoutError):  # no answer and no FIN: only a timeout tells
            sock.recv(16)
    link.heal()
    for sock in (before, after):  # bytes were lost: the half-open connections are reset
        sock.settimeout(5)
        with pytest.raises(ConnectionResetError):
            sock.recv(16) or sock.recv(16)
        sock.close()
    with _connect(link) as sock:
        assert _round_trip(sock, b"b") == b"b"


def test_blackhole_of_open_connections_only(link: Link) -> None:
    with _connect(link) as old:
        assert _round_trip(old, b"c") == b"c"  # the proxy has accepted it
        link.blackhole(new=False)
        with _connect(link) as new:
            assert _round_trip(new, b"c") == b"c"
        old.sendall(b"d")
        old.settimeout(0.3)  # short only where the timeout is the expected end
        with pytest.raises(TimeoutError):
            old.recv(16)


def test_reset_and_refuse(link: Link) -> None:
    with _connect(link) as sock:
        assert _round_trip(sock, b"e") == b"e"
        link.reset()
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            sock.sendall(b"e")
            sock.recv(16) or sock.recv(16)
    link.refuse()
    with pytest.raises(ConnectionRefusedError):
        _connect(link)
    link.refuse(False)
    with _connect(link) as sock:
        assert _round_trip(sock, b"f") == b"f"


def test_a_server_that_is_down_resets_the_client(echo: tuple[str, int]) -> None:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        nobody = spare.getsockname()[1]
    with FaultProxy() as proxy:
        link = proxy.link("nowhere", "127.0.0.1", nobody)
        with pytest.raises((ConnectionResetError, BrokenPipeError)), _connect(link) as sock:
            sock.sendall(b"g")
            sock.recv(16) or sock.recv(16)
        assert link.stats["refused"] == 1


# -- the protocols ---------------------------------------------------------------------------------


def _packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def _query(sql: str) -> bytes:
    return _packet(0, b"\x03" + sql.encode())


def _ok(autocommit: bool, in_trans: bool) -> bytes:
    return _packet(1, b"\x00\x01\x00" + (2 * autocommit + in_trans).to_bytes(2, "little") + b"\x00\x00")


def test_mysql_packets_are_cut_at_their_length_whatever_the_chunks() -> None:
    stream = _query("SELECT 1") + _query("x" * 300)
    frames = MySQLPackets()
    got = [p for i in range(0, len(stream), 7) for p in frames.feed(stream[i : i + 7])]
    assert got == [_query("SELECT 1"), _query("x" * 300)]


def test_mysql_commit_is_the_commit_of_a_matching_statement_or_its_autocommit() -> None:
    match, t = mysql_commit(r"status='success'"), MySQLTracker()
    assert not match(t.request(_query("SET AUTOCOMMIT = 0")))
    assert t.reply(_ok(autocommit=False, in_trans=False)) is not None and not t.autocommit
    assert not match(t.request(_query("UPDATE t SET status='success' WHERE id=1")))
    t.reply(_ok(autocommit=False, in_trans=True))
    commit = t.request(_query("COMMIT"))
    assert match(commit) and t.reply(_ok(False, False)) is commit
    assert not match(t.request(_query("UPDATE t SET status='pending'")))
    t.reply(_ok(False, True))
    assert not match(t.request(_query("commit")))  # nothing matching in that transaction
    t.reply(_ok(False, False))
    t.request(_query("SET AUTOCOMMIT = 1"))
    t.reply(_ok(True, False))
    assert match(t.request(_query("UPDATE t SET status='success'")))  # commits on its own
    assert t.request(_packet(1, b"\x03COMMIT")) is None  # not a command: a later packet of one


def test_resp_values_are_cut_whole_and_replies_pair_with_requests_in_order() -> None:
    requests = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*4\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\nPING\r\n"
    replies = b"$-1\r\n*2\r\n:1\r\n*1\r\n+ok\r\n+PONG\r\n%1\r\n+a\r\n$2\r\nbc\r\n"
    frames = RespMessages()
    cut = [m for i in range(0, len(replies), 3) for m in frames.feed(replies[i : i + 3])]
    assert cut == [b"$-1\r\n", b"*2\r\n:1\r\n*1\r\n+ok\r\n", b"+PONG\r\n", b"%1\r\n+a\r\n$2\r\nbc\r\n"]
    t = RedisTracker()
    sent = [t.request(m) for m in RespMessages().feed(requests)]
    assert [r.command for r in sent] == ["GET", "EVALSHA", "PING"]
    assert [redis_script()(r) for r in sent] == [False, True, False]
    assert redis_script("^abc")(sent[1]) and not redis_script("^zzz")(sent[1])
    assert [t.reply(m) for m in cut[:3]] == sent
