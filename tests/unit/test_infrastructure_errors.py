"""Which database and Redis errors mean "the infrastructure cannot serve now" (issue 13, item 3).

They must become ``Unavailable`` (retried, then backed off from, never charged to a task: I9),
and only they: an error in the request is a bug and surfaces as itself. The codes that a real
server can be made to return are also provoked in tests/integration/test_infrastructure_errors.py;
this table covers the rest (MySQL-only codes, shutdown, connection kills)."""

from __future__ import annotations

import pymysql
import pytest
import redis
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from docllm.adapters.redis.errors import means_unavailable, redis_errors
from docllm.adapters.sql.engine import TransientRetry, error_kind
from docllm.domain.errors import Unavailable


def _db_error(code: int, message: str = "...", cls=OperationalError):
    return cls("UPDATE task_doc_llm ...", {}, pymysql.err.OperationalError(code, message))


@pytest.mark.parametrize(
    "code, kind",
    [
        (2006, "lost"),
        (2013, "lost"),  # the connection is gone: a COMMIT may have landed
        (1053, "lost"),  # server shutdown in progress
        (1317, "lost"),  # query interrupted (KILL QUERY)
        (1927, "lost"),  # connection killed (MariaDB)
        (1969, "lost"),  # MariaDB max_statement_time
        (3024, "lost"),  # MySQL max_execution_time
        (4031, "lost"),  # disconnected for inactivity (MariaDB)
        (1040, "transient"),  # too many connections
        (1203, "transient"),  # max_user_connections (global)
        (1226, "transient"),  # the account's MAX_USER_CONNECTIONS
        (1205, "transient"),
        (1213, "transient"),  # lock wait timeout, deadlock
        (1290, "transient"),  # --read-only: a replica, or a primary during a failover
        (1792, "transient"),  # a READ ONLY transaction
        (1836, "transient"),  # InnoDB read-only mode
        (2003, "transient"),  # cannot connect
        (1062, None),
        (1146, None),
        (1064, None),
        (1406, None),  # duplicate key, no table, syntax, too long
    ],
)
def test_database_errors_are_classified_by_code(code, kind):
    assert error_kind(_db_error(code)) == kind


def test_an_exhausted_connection_pool_is_transient():
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    assert error_kind(PoolTimeout("QueuePool limit of size 5 overflow 5 reached")) == "transient"
    with pytest.raises(Unavailable, match="QueuePool"):
        TransientRetry(tries=2, sleep=lambda _: None)(
            lambda: (_ for _ in ()).throw(PoolTimeout("QueuePool limit of size 5 overflow 5 reached"))
        )


def test_a_classified_database_error_ends_as_unavailable_and_an_unclassified_one_as_itself():
    retry = TransientRetry(tries=3, sleep=lambda _: None)
    for code in (1290, 1792, 1040, 1053, 1317, 3024, 1969):
        with pytest.raises(Unavailable, match=str(code)):
            retry(lambda c=code: (_ for _ in ()).throw(_db_error(c)))
    with pytest.raises(IntegrityError):
        retry(lambda: (_ for _ in ()).throw(_db_error(1062, cls=IntegrityError)))
    with pytest.raises(ProgrammingError):
        retry(lambda: (_ for _ in ()).throw(_db_error(1146, cls=ProgrammingError)))


SCRIPT = "Error running script (call to f_199a923e): @user_script:67: @user_script: 67: "


@pytest.mark.parametrize(
    "exc, unavailable",
    [
        (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), True),
        (redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"), True),
        (redis.exceptions.ConnectionError("Connection refused"), True),
        (redis.exceptions.TimeoutError("Timeout reading from socket"), True),
        # what a script's redis.call error looks like as a plain ResponseError (Redis 6, or unwrapped)
        (redis.exceptions.ResponseError(SCRIPT + "-READONLY You can't write against a read only replica."), True),
        (redis.exceptions.ResponseError(SCRIPT + "-LOADING Redis is loading the dataset in memory"), True),
        (redis.exceptions.ResponseError(SCRIPT + "-MASTERDOWN Link with MASTER is down"), True),
        (redis.exceptions.ResponseError("READONLY You can't write against a read only replica."), True),
        (redis.exceptions.ResponseError("TRYAGAIN Multiple keys request during rehashing of slot"), True),
        (redis.exceptions.ResponseError("CLUSTERDOWN The cluster is down"), True),
        (redis.exceptions.ResponseError("NOREPLICAS Not enough good replicas to write."), True),
        (redis.exceptions.ResponseError("BUSY Redis is busy running a script."), True),
        # the script cache emptied by a restart, again between redis-py's reload and its retry
        (redis.exceptions.NoScriptError("No matching script. Please use EVAL."), True),
        (redis.exceptions.ResponseError("NOSCRIPT No matching script. Please use EVAL."), True),
        # errors in the request: bugs, not outages
        (redis.exceptions.ResponseError("wrong number of arguments for 'evalsha' command"), False),
        (redis.exceptions.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), False),
        (redis.exceptions.ResponseError(SCRIPT + "-ERR user_script:3: attempt to index a nil value"), False),
        (redis.exceptions.ResponseError("Error running script: bad reason 'READONLY replica' in a payload"), False),
        (redis.exceptions.ResponseError("BUSYGROUP Consumer Group name already exists"), False),
        (redis.exceptions.DataError("Invalid input of type: 'dict'"), False),
    ],
)
def test_redis_errors_are_classified_by_what_they_mean(exc, unavailable):
    assert means_unavailable(exc) is unavailable
    if unavailable:
        with pytest.raises(Unavailable), redis_errors("test"):
            raise exc
    else:
        with pytest.raises(type(exc)), redis_errors("test"):
            raise exc
