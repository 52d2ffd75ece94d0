"""``utcnow()``: the database's current UTC time, compiled per dialect.

Every timestamp the repository writes comes from the database, never from the worker's clock
(ARCHITECTURE.md, Clocks), and in UTC whatever the session or server time zone is (D4): MySQL's
``NOW()`` and ``CURRENT_TIMESTAMP`` follow the session time zone, ``UTC_TIMESTAMP()`` does not.
"""

from __future__ import annotations

from datetime import UTC

from sqlalchemy.dialects.mysql import DATETIME
from sqlalchemy.exc import CompileError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import DateTime, Float, TypeDecorator

# The text SQLAlchemy's SQLite DateTime stores ('YYYY-MM-DD HH:MM:SS.ffffff'). SQLite compares
# these as strings, so the database must write the same six-digit form ('%f' gives three).
SQLITE_UTC_NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


class UtcDateTime(TypeDecorator):
    """A naive UTC DATETIME in the database, an aware UTC ``datetime`` in Python."""

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime())

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value, dialect):
        return None if value is None else value.replace(tzinfo=UTC)


class utcnow(FunctionElement):  # noqa: N801 - reads like the SQL function it stands for
    type = UtcDateTime()
    inherit_cache = True


@compiles(utcnow, "mysql")
@compiles(utcnow, "mariadb")
def _mysql_utcnow(element, compiler, **kw):
    return "UTC_TIMESTAMP(6)"


@compiles(utcnow, "sqlite")
def _sqlite_utcnow(element, compiler, **kw):
    return SQLITE_UTC_NOW


@compiles(utcnow, "postgresql")
def _postgresql_utcnow(element, compiler, **kw):
    return "(CURRENT_TIMESTAMP AT TIME ZONE 'UTC')"


class utc_ago(FunctionElement):  # noqa: N801 - as utcnow
    """The database's UTC time ``seconds`` ago (a whole number, rendered into the SQL)."""

    type = UtcDateTime()
    inherit_cache = False  # ``seconds`` is rendered into the text: no cached statement may reuse it

    def __init__(self, seconds: int):
        self.seconds = int(seconds)
        super().__init__()


@compiles(utc_ago, "mysql")
@compiles(utc_ago, "mariadb")
def _mysql_utc_ago(element, compiler, **kw):
    return f"(UTC_TIMESTAMP(6) - INTERVAL {element.seconds} SECOND)"


@compiles(utc_ago, "sqlite")
def _sqlite_utc_ago(element, compiler, **kw):
    return f"strftime('%Y-%m-%d %H:%M:%f000', 'now', '-{element.seconds} seconds')"


@compiles(utcnow)
def _unsupported_utcnow(element, compiler, **kw):
    raise CompileError(f"utcnow() has no UTC form for dialect {compiler.dialect.name!r}")


class minute_of(FunctionElement):  # noqa: N801 - reads like the SQL function it stands for
    """A timestamp's minute as text, 'YYYY-MM-DD HH:MM' (the same form on every dialect)."""

    inherit_cache = True


@compiles(minute_of, "mysql")
@compiles(minute_of, "mariadb")
def _mysql_minute(element, compiler, **kw):
    pattern = "%Y-%m-%d %H:%i"
    if compiler.dialect.paramstyle in ("format", "pyformat"):  # PyMySQL: a literal % is written %%
        pattern = pattern.replace("%", "%%")
    return f"DATE_FORMAT({compiler.process(element.clauses, **kw)}, '{pattern}')"


@compiles(minute_of, "sqlite")
def _sqlite_minute(element, compiler, **kw):
    return f"substr({compiler.process(element.clauses, **kw)}, 1, 16)"  # the text form above


@compiles(minute_of, "postgresql")
def _postgresql_minute(element, compiler, **kw):
    return f"to_char({compiler.process(element.clauses, **kw)}, 'YYYY-MM-DD HH24:MI')"


class seconds_between(FunctionElement):  # noqa: N801 - as utcnow
    """Seconds from the first timestamp to the second, with fractions, on every dialect."""

    type = Float()
    inherit_cache = True


@compiles(seconds_between, "mysql")
@compiles(seconds_between, "mariadb")
def _mysql_seconds_between(element, compiler, **kw):
    start, end = (compiler.process(c, **kw) for c in element.clauses)
    return f"(TIMESTAMPDIFF(MICROSECOND, {start}, {end}) / 1000000.0)"


@compiles(seconds_between, "sqlite")
def _sqlite_seconds_between(element, compiler, **kw):
    start, end = (compiler.process(c, **kw) for c in element.clauses)
    return f"((julianday({end}) - julianday({start})) * 86400.0)"


@compiles(seconds_between, "postgresql")
def _postgresql_seconds_between(element, compiler, **kw):
    start, end = (compiler.process(c, **kw) for c in element.clauses)
    return f"EXTRACT(EPOCH FROM ({end} - {start}))"
