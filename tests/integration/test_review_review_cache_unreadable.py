"""Hostile review of the review cache (issue 46): a cache that cannot be read. ``ReviewMemory.recall``
promises "None when the cache cannot be read (the review goes on without it)", but only
``Unavailable`` and ``PermanentError`` are caught: a table that is not there (0011 half applied on
MariaDB, whose DDL is not transactional: ``fresh`` added, the CREATE TABLE lost; or a worker account
granted per table) raises the driver's error out of ``reserve``, which reads as a reviewer bug: the
attempt is charged, and every task fails once its attempts are spent, with the LLM up. And
``require_schema`` checks only the ``fresh`` column, so the worker starts. The rig of
tests/integration/test_review_cache.py (real openai client, test server, SQLite)."""

from __future__ import annotations

from sqlalchemy import text

from docllm.adapters.sql.migrations import require_schema
from docllm.domain.errors import ConfigurationError
from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_review_cache import rig  # noqa: F401 - rig is a fixture


def test_a_review_cache_that_cannot_be_read_does_not_charge_or_fail_the_task(rig):  # noqa: F811
    with rig.engine.begin() as conn:
        conn.execute(text("DROP TABLE review_cache"))
    row = rig.review()
    assert (row.status, row.retry_count) == (TaskStatus.success, 0), (row.status, row.retry_count, row.error)


def test_a_worker_refuses_at_start_a_database_without_the_review_cache_table(rig):  # noqa: F811
    with rig.engine.begin() as conn:
        conn.execute(text("DROP TABLE review_cache"))
    try:
        require_schema(rig.engine)
    except ConfigurationError as exc:
        assert "init-db" in str(exc)
    else:
        raise AssertionError("require_schema passed a database without the review_cache table")


def test_on_mariadb_a_review_cache_without_its_table_does_not_charge_or_fail_the_task(mysql_url):
    """The same on MariaDB (1146, table doesn't exist, is not one of engine.py's transient codes)."""
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.migrations import upgrade_schema
    from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
    from sim.manual_clock import ManualClock
    from tests.integration.test_review_cache import Rig
    from tests.support.llm_server import FakeLLM
    from tests.support.memory.queue import InMemoryTaskQueue

    engine = make_engine(mysql_url)
    upgrade_schema(engine)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE review_cache"))
    clock = ManualClock()
    try:
        with FakeLLM() as llm:
            mine = Rig(llm, SqlAlchemyTaskRepository(engine), InMemoryTaskQueue(clock), clock, engine)
            row = mine.review()
    finally:
        engine.dispose()
    assert (row.status, row.retry_count) == (TaskStatus.success, 0), (row.status, row.retry_count, row.error)
