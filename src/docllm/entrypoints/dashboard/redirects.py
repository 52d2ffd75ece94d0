"""Where the login form may send the browser next: a path on this site, nothing else (issue 50).

Browsers forgive a lot in a Location header: they drop TAB, CR and LF anywhere in it and read a
backslash as a slash, so ``/\\t/evil.example/`` and ``/\\evil.example/`` both go to another host.
The target is judged as a browser would read it, and anything that is not plainly a path here
sends the browser to the overview instead.
"""

from __future__ import annotations

from urllib.parse import urlsplit

HOME = "/"


def safe_next(target: str | None) -> str:
    if not target or not target.isascii() or not target.isprintable() or " " in target:
        return HOME  # control characters, whitespace, anything a browser might drop or rewrite
    read = target.replace("\\", "/")
    parts = urlsplit(read)
    if parts.scheme or parts.netloc or not read.startswith("/") or read.startswith("//"):
        return HOME
    return read
