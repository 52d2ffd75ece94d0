"""``DOCLLM_REDIS_URL`` read into a topology (ARCHITECTURE.md, Topologies). Standard library only, so the
settings can check a URL at start without importing redis-py.

- ``redis://``, ``rediss://``, ``unix://``: one server (redis-py reads these itself);
- ``redis+sentinel://[:password@]host:26379[,host:26379...]/MASTER_NAME[/DB]`` (``rediss+sentinel``
  for TLS to sentinels and data nodes): the password is the data nodes'; the sentinels' comes from
  ``?sentinel_password=`` (and ``sentinel_username=``), else the same one;
- ``redis+cluster://[:password@]host:6379[,host:6379...]`` (``rediss+cluster`` for TLS): any
  nodes of the cluster, the rest are discovered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

SINGLE_SCHEMES = ("redis://", "rediss://", "unix://")
SENTINEL_SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
# Query options handed to the data-node connections as they are (TLS files, mostly).
PASSED_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")


@dataclass(frozen=True)
class RedisTarget:
    kind: str  # "single", "sentinel" or "cluster"
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    master_name: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    ssl: bool = False
    options: tuple[tuple[str, str], ...] = ()


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEMES)


def parse_redis_url(url: str) -> RedisTarget:
    """Raises ``ValueError`` with the reason when ``url`` is not one docllm can use."""
    if url.startswith(SINGLE_SCHEMES):
        return RedisTarget("single", url)
    if not url.startswith(SENTINEL_SCHEMES + CLUSTER_SCHEMES):
        raise ValueError("must be redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://")
    scheme, rest = url.split("://", 1)
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    username = password = None
    if "@" in netloc:
        creds, netloc = netloc.rsplit("@", 1)
        user, _, secret = creds.partition(":")
        username, password = unquote(user) or None, unquote(secret) or None
    nodes = tuple(_node(part, 26379 if "sentinel" in scheme else 6379) for part in netloc.split(",") if part)
    if not nodes:
        raise ValueError("names no host")
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    ssl = scheme.startswith("rediss")
    options = tuple((k, v) for k, v in params.items() if k in PASSED_OPTIONS)
    if "cluster" in scheme:
        if path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has database 0 only")
        return RedisTarget("cluster", url, nodes, username=username, password=password, ssl=ssl, options=options)
    parts = [unquote(p) for p in path.split("/") if p]
    if not parts or len(parts) > 2:
        raise ValueError("must name the master: redis+sentinel://host:26379[,host:26379]/MASTER_NAME[/DB]")
    if len(parts) == 2 and not parts[1].isdigit():
        raise ValueError(f"database {parts[1]!r} is not a number")
    return RedisTarget(
        "sentinel",
        url,
        nodes,
        master_name=parts[0],
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=username,
        password=password,
        sentinel_username=params.get("sentinel_username", username),
        sentinel_password=params.get("sentinel_password", password),
        ssl=ssl,
        options=options,
    )


def _node(text: str, default_port: int) -> tuple[str, int]:
    match = re.fullmatch(r"\[?([^\[\]]+?)\]?(?::(\d+))?", text.strip())
    if not match:
        raise ValueError(f"bad host {text!r}")
    return match.group(1), int(match.group(2) or default_port)


def hash_tag(prefix: str) -> str | None:
    """The part of a key Redis Cluster hashes when the key is ``prefix:...`` (the first ``{...}``
    with something inside), or None when the whole key is hashed."""
    start = prefix.find("{")
    if start < 0:
        return None
    end = prefix.find("}", start + 1)
    return prefix[start + 1 : end] if end > start + 1 else None
