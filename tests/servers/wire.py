"""What the fault proxy reads of the MySQL and Redis protocols: message boundaries, which reply
answers which request, and whether a request commits a transaction or runs a Redis script.

MySQL: packets of a 3-byte little-endian length, a sequence number and a payload. A client packet
with sequence 0 starts a command (0x03 COM_QUERY, then the SQL text); the client waits for the
whole reply before its next command, so the first server packet after a command is the head of its
reply: 0x00 OK (with the status flags: autocommit, in transaction), 0xFF ERR, or a result set.
A COM_QUERY commits when it is COMMIT, or when it is a statement run in autocommit mode outside a
transaction (the last OK said so).

RESP (Redis): requests are arrays of bulk strings (or inline lines), replies any RESP2/RESP3 value,
answered in order (pipelines included), so a queue of requests pairs each reply with its request.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

COM_QUERY = 0x03
_IN_TRANS, _AUTOCOMMIT = 0x0001, 0x0002
_COMMIT = re.compile(r"^\s*COMMIT\b", re.I)
_ENDS_TRANSACTION = re.compile(r"^\s*(ROLLBACK|BEGIN|START\s+TRANSACTION)\b", re.I)
SCRIPT_COMMANDS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})


@dataclass
class Request:
    """One client request, as far as a rule needs to know it."""

    command: str  # MySQL: "COM_QUERY" or the command byte in hex; Redis: the command name, upper case
    text: str = ""  # MySQL: the SQL of a COM_QUERY; Redis: the arguments joined by spaces
    commits: bool = False  # MySQL: this request ends a transaction with a commit
    statements: list[str] = field(default_factory=list)  # MySQL: what that commit makes durable
    action: object = None  # the rule that acts on its reply (set by the proxy)


Match = Callable[[Request | None], bool]


class Framer(Protocol):
    def feed(self, data: bytes) -> list[bytes]: ...


class Tracker(Protocol):
    def request(self, message: bytes) -> Request | None: ...

    def reply(self, message: bytes) -> Request | None: ...


def mysql_commit(statement: str | None = None) -> Match:
    """The COMMIT (or autocommitted statement) that makes durable a statement matching ``statement``
    (a regular expression searched in the SQL; None: any commit)."""
    pattern = re.compile(statement, re.I | re.S) if statement else None
    return lambda r: r is not None and r.commits and (pattern is None or any(pattern.search(s) for s in r.statements))


def redis_script(argument: str | None = None) -> Match:
    """EVAL/EVALSHA/FCALL, optionally only when ``argument`` (a regular expression) is found in its
    arguments (a script's SHA, a key)."""
    pattern = re.compile(argument) if argument else None
    return lambda r: (
        r is not None and r.command in SCRIPT_COMMANDS and (pattern is None or bool(pattern.search(r.text)))
    )


# -- framing -------------------------------------------------------------------------------------


class MySQLPackets:
    """Cuts a byte stream into whole packets (header included)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            end = 4 + int.from_bytes(self.buf[:3], "little")
            if len(self.buf) < end:
                break
            out.append(bytes(self.buf[:end]))
            del self.buf[:end]
        return out


class _Incomplete(Exception):
    pass


def _resp_end(buf: bytes | bytearray, i: int) -> int:
    """Where the RESP value that starts at ``i`` ends (an inline command is one line)."""
    nl = buf.find(b"\r\n", i)
    if nl < 0:
        raise _Incomplete
    kind, line, j = buf[i : i + 1], buf[i + 1 : nl], nl + 2
    if kind in (b"$", b"!", b"="):  # bulk string, blob error, verbatim string
        n = int(line)
        if n >= 0 and len(buf) < j + n + 2:
            raise _Incomplete
        return j + n + 2 if n >= 0 else j
    if kind in (b"*", b"~", b">"):  # array, set, push
        count = max(0, int(line))
    elif kind == b"%":  # map
        count = 2 * int(line)
    elif kind == b"|":  # attributes, then the value they describe
        count = 2 * int(line) + 1
    else:  # simple string, error, integer, null, boolean, double, big number; an inline command
        count = 0
    for _ in range(count):
        j = _resp_end(buf, j)
    return j


class RespMessages:
    """Cuts a byte stream into whole RESP values."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while self.buf:
            try:
                end = _resp_end(self.buf, 0)
            except _Incomplete:
                break
            out.append(bytes(self.buf[:end]))
            del self.buf[:end]
        return out


def _resp_words(message: bytes) -> list[str]:
    """The words of a request: an array of bulk strings, or an inline line."""
    if not message.startswith(b"*"):
        return message.decode("utf-8", "replace").split()
    words, nl = [], message.find(b"\r\n")
    j = nl + 2
    for _ in range(int(message[1:nl])):
        nl = message.find(b"\r\n", j)
        n = int(message[j + 1 : nl])
        words.append(message[nl + 2 : nl + 2 + n].decode("utf-8", "replace"))
        j = nl + 2 + n + 2
    return words


# -- which reply answers which request -------------------------------------------------------------


class MySQLTracker:
    """Follows one MySQL connection: its commands, their replies' heads, its transaction state."""

    def __init__(self) -> None:
        self.autocommit, self.in_trans = True, False  # the server's defaults; every OK updates them
        self.uncommitted: list[str] = []
        self.waiting: Request | None = None

    def request(self, message: bytes) -> Request | None:
        packet = message
        if packet[3] != 0 or len(packet) < 5:  # handshake and continuation packets
            return None
        payload = packet[4:]
        if payload[0] != COM_QUERY:
            self.waiting = Request(command=f"0x{payload[0]:02x}")
            return self.waiting
        sql = payload[1:].decode("utf-8", "replace")
        req = Request(command="COM_QUERY", text=sql)
        if _COMMIT.match(sql):
            req.commits, req.statements, self.uncommitted = True, self.uncommitted, []
        elif _ENDS_TRANSACTION.match(sql):
            self.uncommitted = []
        elif self.autocommit and not self.in_trans:
            req.commits, req.statements = True, [sql]
        else:
            self.uncommitted.append(sql)
        self.waiting = req
        return req

    def reply(self, message: bytes) -> Request | None:
        """The request whose reply this packet begins, or None (the rest of a reply)."""
        packet = message
        req, self.waiting = self.waiting, None
        payload = packet[4:]
        if req is not None and payload[:1] == b"\x00" and len(payload) >= 7:
            i = 1
            for _ in range(2):  # affected rows, last insert id: length-encoded integers
                i += {0xFC: 3, 0xFD: 4, 0xFE: 9}.get(payload[i], 1)
            flags = int.from_bytes(payload[i : i + 2], "little")
            self.autocommit, self.in_trans = bool(flags & _AUTOCOMMIT), bool(flags & _IN_TRANS)
        return req


class RedisTracker:
    """Pairs each reply of one Redis connection with its request (replies come in order)."""

    def __init__(self) -> None:
        self.pending: deque[Request] = deque()

    def request(self, message: bytes) -> Request:
        words = _resp_words(message)
        req = Request(command=words[0].upper() if words else "", text=" ".join(words[1:]))
        self.pending.append(req)
        return req

    def reply(self, message: bytes) -> Request | None:
        if message.startswith(b">") or not self.pending:  # a RESP3 push answers nothing
            return None
        return self.pending.popleft()


PROTOCOLS: dict[str, tuple[type[Framer], type[Tracker]]] = {
    "mysql": (MySQLPackets, MySQLTracker),
    "redis": (RespMessages, RedisTracker),
}
