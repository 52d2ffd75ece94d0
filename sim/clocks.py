"""Every clock of a run, all derived from the world's true time (DESIGN section 6).

- The authority: the Redis server's clock, a ``ManualClock`` that the queue adapter and the
  services read. It may be offset from true time; nothing in the product can tell.
- One wall clock per actor (offset and drift): only the original design reads them
  (``time.time()``, ``datetime.utcnow()``), and the deliberately broken reaper of ``sim.breaks``.
- The database's clock and session time zone: SQLite's ``strftime(fmt, 'now')`` is replaced on the
  run's connection, so the product's ``utcnow()`` records virtual UTC, and ``sim_db_now()`` gives
  the original design's ``NOW()`` in the session time zone (e.g. UTC+8).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import event
from sqlalchemy.engine import Engine

from sim.manual_clock import ManualClock
from sim.world import EPOCH_MS, World


def authority_clock(world: World, offset_ms: Callable[[], int]) -> ManualClock:
    """The Redis server's clock: true time plus ``offset_ms()`` (a step changes it), moved by the
    world as time passes."""
    clock = ManualClock(EPOCH_MS + offset_ms())
    world.on_advance.append(lambda t: clock.set(EPOCH_MS + offset_ms() + t))
    return clock


@dataclass
class WallClock:
    """An actor's wall clock: true time, plus an offset, plus a drift in parts per million."""

    world: World
    offset_ms: int = 0
    drift_ppm: float = 0.0

    def now_ms(self) -> int:
        t = self.world.now
        return EPOCH_MS + t + self.offset_ms + int(t * self.drift_ppm / 1e6)

    def time(self) -> float:
        """``time.time()`` on this actor."""
        return self.now_ms() / 1000.0

    def utcnow(self) -> datetime:
        """``datetime.utcnow()`` on this actor (naive UTC, as the original note uses it)."""
        return datetime(1970, 1, 1) + timedelta(milliseconds=self.now_ms())

    def describe(self) -> str:
        return f"{self.offset_ms / 3_600_000:+.2f}h drift {self.drift_ppm:+.0f}ppm"


@dataclass
class DbClock(WallClock):
    """The database server's clock; ``tz_hours`` is its session time zone (``NOW()``)."""

    tz_hours: float = 0.0

    def utc(self) -> datetime:
        return datetime.fromtimestamp(self.now_ms() / 1000.0, tz=UTC).replace(tzinfo=None)

    def session_now_text(self) -> str:
        """MySQL ``NOW()``: the session time zone's wall time, whole seconds (DATETIME)."""
        local = self.utc() + timedelta(hours=self.tz_hours)
        return local.strftime("%Y-%m-%d %H:%M:%S")

    def describe(self) -> str:
        return f"{super().describe()} NOW() in UTC{self.tz_hours:+g}"


def sqlite_strftime(fmt: str, when: datetime) -> str:
    """SQLite's strftime for the formats the adapters use ('%f' is 'SS.SSS' in SQLite)."""
    fmt = fmt.replace("%f", f"{when.second:02d}.{when.microsecond // 1000:03d}")
    return when.strftime(fmt)


def install_db_clock(engine: Engine, clock: DbClock) -> None:
    """Make the run's SQLite connection tell virtual time. Call before the engine's first use."""
    fallback = sqlite3.connect(":memory:")

    def strftime(fmt: str, value: str) -> str | None:
        if value == "now":
            return sqlite_strftime(fmt, clock.utc())
        return fallback.execute("SELECT strftime(?, ?)", (fmt, value)).fetchone()[0]

    @event.listens_for(engine, "connect")
    def _register(dbapi_connection, _record) -> None:
        dbapi_connection.create_function("strftime", 2, strftime)
        dbapi_connection.create_function("sim_db_now", 0, clock.session_now_text)


def datetime_text(when: datetime) -> str:
    """How the original design's bound parameter ``timeout_dt`` compares in the database."""
    return when.strftime("%Y-%m-%d %H:%M:%S")
