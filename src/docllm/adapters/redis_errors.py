"""The one translation of redis-py's errors into the domain's ``Unavailable``, for every Redis
adapter: what an error means decides, not which client class it arrived as."""

from __future__ import annotations

import re
from collections.abc import Iterator
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
)

# The same conditions as error-reply prefixes: a replica after a failover (READONLY), a restart
# loading its data (LOADING), a replica cut off from its primary (MASTERDOWN), a cluster moving
# slots (TRYAGAIN, CLUSTERDOWN), too few replicas for a write (NOREPLICAS), another script
# running too long (BUSY). A command that gets one directly comes through as the classes above;
# raised by redis.call inside a script it can arrive as a plain ResponseError, wrapped
# ("Error running script (call to f_...): @user_script:9: -READONLY You can't write ...",
# Redis 6) or not.
UNAVAILABLE_REPLIES = frozenset({"READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "BUSY"})
_REPLY_CODE = re.compile(r"(?:Error running script [^\n]*?: -)?(?:ERR )?([A-Z]+)\b")


def means_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, _UNAVAILABLE):
        return True
    if not isinstance(exc, redis.exceptions.ResponseError):
        return False
    match = _REPLY_CODE.match(str(exc))
    return match is not None and match.group(1) in UNAVAILABLE_REPLIES


@contextmanager
def redis_errors(what: str) -> Iterator[None]:
    """Turn redis-py's "cannot serve now" errors into ``Unavailable`` (other errors are bugs: re-raised)."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        if not means_unavailable(exc):
            raise
        raise Unavailable(f"redis {what}: {type(exc).__name__}: {exc}") from None
