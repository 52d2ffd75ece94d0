"""Engines for MySQL/MariaDB (PyMySQL) and SQLite, and the retry of transient database errors.

``make_engine`` connects to nothing: the first connection is made by the first query.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import StaticPool

from docllm.domain.backoff import capped_delay, jittered
from docllm.domain.errors import Unavailable

T = TypeVar("T")

ER_UNKNOWN_SYSTEM_VARIABLE = 1193  # MySQL: no idle_transaction_timeout
IDLE_PING_SECONDS = 5.0  # a pooled connection idle this long is pinged before it is lent again

# MySQL/MariaDB errors that say the database cannot do the work right now, not that the work is
# wrong: they are retried, then reported as ``Unavailable`` and never charged to a task (I9).
# The one table of them, by what each code means.
#
# Cut off: the connection or the statement ended mid-way, so a COMMIT may have landed first; a
# retried write must recognise its own earlier success (``SqlAlchemyTaskRepository._write``).
CUT_OFF = {
    2006: "server has gone away",
    2013: "lost connection during a query",
    1053: "server shutdown in progress",
    1317: "query interrupted (KILL QUERY, a failover tool)",
    1927: "connection killed (MariaDB)",
    1969: "statement timeout (MariaDB max_statement_time)",
    3024: "statement timeout (MySQL max_execution_time)",
    4031: "disconnected by the server for inactivity (MariaDB)",
}
# Refused: nothing was done; the same statement may succeed on a later try.
REFUSED = {
    1040: "too many connections",
    1203: "the user has too many connections (max_user_connections)",
    1226: "the account's resource limit (MAX_USER_CONNECTIONS, queries per hour)",
    1205: "lock wait timeout",
    1213: "deadlock",
    1290: "running with --read-only (a replica, or a primary during a failover)",
    1792: "read-only transaction (transaction_read_only after a failover)",
    1836: "running in read-only mode (InnoDB read-only)",
    2003: "cannot connect",
    # Full: the server cannot write anything now (issue 44: an outage of the store, no report's
    # fault; read as a refusal, a group would be halved and each report failed for good).
    3: "error writing a file (the disk is full)",
    1021: "disk full",
    1114: "the table is full",
}


# SQLite's errors of the same kinds, by their text (its driver gives no code).
SQLITE_TRANSIENT = ("database is locked", "database table is locked", "database or disk is full")


def make_engine(url: str | URL, *, connect_timeout: float = 10, io_timeout: float = 60, pool_size: int = 8) -> Engine:
    """An engine for ``DOCLLM_DATABASE_URL``; ``io_timeout`` bounds a read or write on a hung server.

    ``pool_size`` (``DOCLLM_STORE_CONNECTIONS``) is all the process ever holds (no overflow): the
    worker's writes go in groups, at most two in flight, and a caller beyond the pool waits for a
    connection (``pool_timeout``) rather than opening one more on the server."""
    url = make_url(url)
    backend = url.get_backend_name()
    if backend in ("mysql", "mariadb"):
        if "+" not in url.drivername:
            url = url.set(drivername=f"{backend}+pymysql")
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        engine = create_engine(
            url,
            pool_size=pool_size,
            max_overflow=0,
            pool_recycle=1800,
            isolation_level="READ COMMITTED",
            connect_args={
                "connect_timeout": connect_timeout,
                "read_timeout": io_timeout,
                "write_timeout": io_timeout,
            },
        )
        _end_abandoned_transactions(engine, idle_seconds=max(1, math.ceil(2 * io_timeout)))
        _read_packet_limit(engine)
        ping_when_idle(engine, IDLE_PING_SECONDS)
        return engine
    if backend == "sqlite":
        return _sqlite_engine(url, pool_size)
    return create_engine(url, pool_pre_ping=True)


def ping_when_idle(engine: Engine, idle_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
    """Check a connection at check-out only when it sat idle in the pool for ``idle_seconds``: one
    the server dropped meanwhile (a restart, ``wait_timeout``, a NAT that forgot it) is replaced
    before use, and a busy pool pays no ping per check-out (``pool_pre_ping`` pays one each time).
    A connection that breaks while in use is seen by its statement's error (``error_kind``: lost)."""

    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_connection, record):
        record.info["idle_since"] = clock()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_connection, record, _proxy):
        since = record.info.pop("idle_since", None)
        if since is None or clock() - since < idle_seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # noqa: BLE001 - any failure: the pool replaces the connection
            raise DisconnectionError(f"an idle pooled connection no longer answers: {exc}") from exc


def _end_abandoned_transactions(engine: Engine, idle_seconds: int) -> None:
    """The server ends a transaction its client left idle for ``idle_seconds``.

    A client whose connection went half-open mid-transaction (its host died, a NAT entry or a
    firewall dropped the connection, its COMMIT never arrived) gives up after the read timeout,
    but the server still sees a live connection and keeps the transaction's row locks until
    ``wait_timeout`` (8 hours by default): every later write of those rows waits and fails. None
    of our transactions waits between its statements, so twice the I/O timeout is safe.
    MariaDB (10.3+) has ``idle_transaction_timeout`` for exactly this; MySQL only ``wait_timeout``,
    which also closes idle pooled connections (the pool's pre-ping replaces them)."""

    @event.listens_for(engine, "connect")
    def _session(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET SESSION idle_transaction_timeout = {idle_seconds}")
        except Exception as exc:  # noqa: BLE001 - which server it is shows in the error
            if not exc.args or exc.args[0] != ER_UNKNOWN_SYSTEM_VARIABLE:
                raise
            cursor.execute(f"SET SESSION wait_timeout = {idle_seconds}")
        finally:
            cursor.close()


def _read_packet_limit(engine: Engine) -> None:
    """Each connection keeps the server's ``max_allowed_packet`` as the server reports it to that
    connection (``info["max_allowed_packet"]``): the store bounds a group's statements below it. A
    statement over it is not refused but cut off (the server drops the connection), which would
    read as an outage and be retried for ever (issue 44)."""

    @event.listens_for(engine, "connect")
    def _packet_limit(dbapi_connection, record):
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT @@max_allowed_packet")
            row = cursor.fetchone()
        finally:
            cursor.close()
        record.info["max_allowed_packet"] = int(row[0]) if row and row[0] else None


def _sqlite_engine(url: URL, pool_size: int) -> Engine:
    if url.database in (None, "", ":memory:") or url.query.get("mode") == "memory":
        # One connection holds the whole in-memory database: every thread shares it, one at a time.
        return create_engine(url, poolclass=TakeTurnsPool, connect_args={"check_same_thread": False})
    # A file database: DOCLLM_STORE_CONNECTIONS connections; a caller beyond them waits for one.
    engine = create_engine(
        url, pool_size=pool_size, max_overflow=0, pool_timeout=60, connect_args={"check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
        cursor.execute("PRAGMA busy_timeout=5000")  # wait for a lock instead of failing at once
        cursor.close()

    return engine


class TakeTurnsPool(StaticPool):
    """The single connection of a StaticPool, lent to one checkout at a time.

    A plain StaticPool hands the same connection to every thread at once, so their transactions
    would interleave. The lock is taken before the connection is lent, and given back with it.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._turn = threading.Lock()

    def _do_get(self):
        if not self._turn.acquire(timeout=30):
            raise RuntimeError("the in-memory SQLite connection was not returned for 30 s (nested use?)")
        try:
            return super()._do_get()
        except BaseException:
            self._turn.release()
            raise

    def _do_return_conn(self, record) -> None:
        self._turn.release()


def error_kind(exc: BaseException) -> str | None:
    """'lost' (the outcome is unknown), 'transient' (nothing happened) or None (not worth a retry)."""
    if isinstance(exc, PoolTimeout):  # every pooled connection busy: nothing was sent
        return "transient"
    if not isinstance(exc, DBAPIError):
        return None
    if exc.connection_invalidated:
        return "lost"
    orig = exc.orig
    code = orig.args[0] if orig is not None and orig.args else None
    if isinstance(code, int) and code in CUT_OFF:
        return "lost"
    if isinstance(code, int) and code in REFUSED:
        return "transient"
    if any(
        text in str(orig) for text in ("database is locked", "database table is locked", "database or disk is full")
    ):
        return "transient"
    return None


@dataclass(frozen=True)
class TransientRetry:
    """A bounded number of tries with short exponential backoff and jitter, then ``Unavailable``."""

    tries: int = 5
    base_delay: float = 0.05
    max_delay: float = 1.0
    sleep: Callable[[float], None] = time.sleep

    def __call__(self, fn: Callable[[], T], on_lost: Callable[[], None] | None = None) -> T:
        """Run ``fn``; ``on_lost`` hears of every lost connection before the next try."""
        tried = 0
        while True:
            tried += 1
            try:
                return fn()
            except (DBAPIError, PoolTimeout) as exc:
                kind = error_kind(exc)
                if kind is None:
                    raise
                if kind == "lost" and on_lost is not None:
                    on_lost()
                if tried >= self.tries:
                    raise Unavailable(
                        f"database unavailable after {tried} tries: {getattr(exc, 'orig', exc)}"
                    ) from None
            delay = capped_delay(self.base_delay, self.max_delay, tried - 1)
            # A draw from (0, 1]: the wait is in [delay / 2, delay), as it always was.
            self.sleep(jittered(delay, 0.5, 1.0 - random.random()))
