"""The HTTP messages of the process's port (``http_server.py``): a request read whole, an answer
written whole, and the limits a request is held to. One request per connection, so no keep-alive,
no pipelining and no chunked bodies to get wrong."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

MAX_HEAD = 16 * 1024  # request line and headers
MAX_BODY = 1024 * 1024  # a dashboard form is a few hundred bytes


@dataclass
class Request:
    method: str
    target: str  # as sent: path and query
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    client: tuple[str, int]
    server: tuple[str, int]

    def header(self, name: str, default: str = "") -> str:
        found = [v for k, v in self.headers if k.lower() == name.lower()]
        return ",".join(found) if found else default


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    @classmethod
    def text(cls, status: int, text: str) -> Response:
        return cls(status, [("Content-Type", "text/plain; charset=utf-8"), *PLAIN_GUARDS], text.encode())


Handler = Callable[[Request], Response]
# On the port's own answers (pages, errors): nothing to sniff, frame or run.
PLAIN_GUARDS = [
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
]


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_head(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise BadRequest(400, "bad request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(505, "HTTP/1.0 or HTTP/1.1 only")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or any(ord(c) < 33 for c in name):
            raise BadRequest(400, "bad header line")  # also an obsolete folded line (leading space)
        headers.append((name, value.strip(" \t")))
    return method, target, version, headers


def body_length(headers: list[tuple[str, str]]) -> int:
    if any(k.lower() == "transfer-encoding" for k, _ in headers):
        raise BadRequest(501, "chunked requests are not accepted: send Content-Length")
    lengths = {v.strip() for k, v in headers if k.lower() == "content-length"}
    if len(lengths) > 1 or not all(x.isascii() and x.isdigit() for x in lengths):  # not "²"
        raise BadRequest(400, "bad Content-Length")
    size = int(lengths.pop()) if lengths else 0
    if size > MAX_BODY:
        raise BadRequest(413, "request body too large")
    return size


def encode(response: Response, with_body: bool = True) -> bytes:
    known = response.status in HTTPStatus._value2member_map_
    lines = [f"HTTP/1.1 {response.status} {HTTPStatus(response.status).phrase if known else ''}".rstrip()]
    given = [v for k, v in response.headers if k.lower() == "content-length"]
    length = given[0] if given and not with_body and not response.body else str(len(response.body))  # HEAD
    headers = [(k, v) for k, v in response.headers if k.lower() not in ("connection", "content-length")]
    headers += [("Content-Length", length), ("Connection", "close")]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (response.body if with_body else b"")
