"""Alembic migrations of the task table, and ``upgrade_schema`` to apply them from code.

No alembic.ini is needed: the configuration is built here and points at this package.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine

from docllm.adapters.sql.engine import make_engine
from docllm.domain.errors import Unavailable

HERE = Path(__file__).parent
LOCK_NAME = "docllm_schema_upgrade"
# Alembic keeps the running migration context in module globals: one upgrade per process at a time.
_IN_PROCESS = threading.Lock()


def require_schema(engine: Engine) -> None:
    """Raise ConfigurationError naming the fix when the task table is missing."""
    from sqlalchemy import inspect

    from docllm.adapters.sql.schema import USAGE_COLUMNS
    from docllm.domain.errors import ConfigurationError

    try:
        inspector = inspect(engine)
        present = inspector.has_table("task_doc_llm")
        columns = {c["name"] for c in inspector.get_columns("task_doc_llm")} if present else set()
    except Exception as exc:  # noqa: BLE001 - unreachable database: say so in one line
        raise Unavailable(f"database: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not present:
        raise ConfigurationError("the database has no task_doc_llm table: run `docllm init-db` first")
    if not set(USAGE_COLUMNS) <= columns:  # this version reads and writes them (migrations 0003, 0007)
        raise ConfigurationError("the task_doc_llm table lacks the LLM usage columns: run `docllm init-db` first")
    if "handbacks" not in columns:  # migration 0004
        raise ConfigurationError("the task_doc_llm table lacks the handbacks column: run `docllm init-db` first")
    if "rubric" not in columns:  # migration 0005
        raise ConfigurationError("the task_doc_llm table lacks the rubric column: run `docllm init-db` first")
    if not {"priority", "tenant"} <= columns:  # migration 0006
        raise ConfigurationError("the task_doc_llm table lacks the lane columns: run `docllm init-db` first")
    if "fresh" not in columns:  # migration 0011 (the review cache)
        raise ConfigurationError("the task_doc_llm table lacks the fresh column: run `docllm init-db` first")
    try:
        cache_table = inspector.has_table("review_cache")  # migration 0011: read and written by every commit
    except Exception as exc:  # noqa: BLE001 - unreachable database: say so in one line
        raise Unavailable(f"database: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not cache_table:
        raise ConfigurationError("the database has no review_cache table: run `docllm init-db` first")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(HERE))
    return config


@contextmanager
def _migration_lock(conn: Connection) -> Iterator[None]:
    """Keep processes that start together from migrating at once (the second finds it done)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock now, so the DDL below is one step
        yield
    elif conn.dialect.name in ("mysql", "mariadb"):
        if conn.execute(text("SELECT GET_LOCK(:name, 60)"), {"name": LOCK_NAME}).scalar() != 1:
            raise Unavailable("another process has been upgrading the schema for 60 s")
        try:
            yield
        finally:
            conn.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": LOCK_NAME})
    else:
        yield


def upgrade_schema(url_or_engine: str | URL | Engine, revision: str = "head") -> None:
    """Bring the database to ``revision``; a no-op when it is there already.

    Pass the engine, not the URL, for an in-memory SQLite database: a URL gets its own engine,
    disposed of (and the database with it) on return.
    """
    owned = not isinstance(url_or_engine, Engine)
    engine = url_or_engine if isinstance(url_or_engine, Engine) else make_engine(url_or_engine)
    config = alembic_config()
    try:
        with _IN_PROCESS, engine.begin() as conn, _migration_lock(conn):
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
    finally:
        if owned:
            engine.dispose()
