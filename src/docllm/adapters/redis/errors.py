"""The one translation of redis-py's errors into the domain's ``Unavailable``, for every Redis
adapter: what an error means decides, not which client class it arrived as."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis

from docllm.domain.errors import Unavailable

# Errors that say "the server cannot answer right now", not "the request is wrong".
# BusyLoadingError (a restart replaying its AOF) is a ConnectionError.
_UNAVAILABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.MasterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    # Cluster: the redirect budget spent in a MOVED/ASK storm ("TTL exhausted"), a redirect that
    # surfaced anyway, a slot without a primary for a moment (not a RedisError: caught apart).
    redis.exceptions.ClusterError,
    redis.exceptions.AskError,
    redis.exceptions.SlotNotCoveredError,
    # A restart emptied the script cache between redis-py's reload of a script and its retry
    # (Script.__call__ reloads once): an outage like LOADING, not a bug; the next call reloads again.
    redis.exceptions.NoScriptError,
)

# The same conditions as error-reply prefixes: a replica after a failover (READONLY), a restart
# loading its data (LOADING), a replica cut off from its primary (MASTERDOWN), a cluster moving
# slots (TRYAGAIN, CLUSTERDOWN), too few replicas for a write (NOREPLICAS), another script
# running too long (BUSY), a script cache emptied by a restart (NOSCRIPT, in a pipeline). A
# command that gets one directly comes through as the classes above; raised by redis.call
# inside a script it can arrive as a plain ResponseError, wrapped ("Error running script
# (call to f_...): @user_script:9: -READONLY You can't write ...", Redis 6) or not.
UNAVAILABLE_REPLIES = frozenset(
    {"READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "BUSY", "MOVED", "ASK", "NOSCRIPT"}
)
_REPLY_CODE = re.compile(r"(?:Error running script [^\n]*?: -)?(?:ERR )?([A-Z]+)\b")


def reply_code(exc: BaseException) -> str | None:
    """The error reply's code (READONLY, MOVED, ...), whether redis-py parsed it into its own class
    (whose message lacks the code) or left it in a plain ResponseError, wrapped by a script or not."""
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return "READONLY"
    if isinstance(exc, redis.exceptions.BusyLoadingError):
        return "LOADING"
    if isinstance(exc, redis.exceptions.MovedError):
        return "MOVED"
    if isinstance(exc, redis.exceptions.AskError):
        return "ASK"
    if not isinstance(exc, redis.exceptions.ResponseError):
        return None
    match = _REPLY_CODE.match(str(exc))
    return match.group(1) if match else None


def means_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, _UNAVAILABLE):
        return True
    return reply_code(exc) in UNAVAILABLE_REPLIES


@contextmanager
def redis_errors(what: str, recover: Callable[[BaseException], None] | None = None) -> Iterator[None]:
    """Turn redis-py's "cannot serve now" errors into ``Unavailable`` (other errors are bugs: re-raised).
    ``recover`` sees each of those errors first (redis_topology.recover: find the primary again)."""
    try:
        yield
    except (redis.exceptions.RedisError, redis.exceptions.SlotNotCoveredError) as exc:
        if not means_unavailable(exc):
            raise
        if recover is not None:
            recover(exc)
        raise Unavailable(f"redis {what}: {type(exc).__name__}: {exc}") from None
