"""Migration 0011 (the review cache, issue 46) on SQLite and a real MariaDB: the table and the
``fresh`` column come and go with it, the tasks stay, and a database left at 0010 is named at start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import alembic_config, require_schema, upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.domain.errors import ConfigurationError


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def engine(request, tmp_path) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    yield engine
    engine.dispose()


def downgrade(engine: Engine, revision: str) -> None:
    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def test_down_to_0010_and_up_again_keeps_the_tasks_and_names_the_missing_column(engine):
    upgrade_schema(engine)
    task = SqlAlchemyTaskRepository(engine).create("kept", "body", fresh=True)
    downgrade(engine, "0010")
    assert "review_cache" not in inspect(engine).get_table_names()
    assert "fresh" not in {c["name"] for c in inspect(engine).get_columns("task_doc_llm")}
    with pytest.raises(ConfigurationError, match="fresh column: run `docllm init-db`"):
        require_schema(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT task_name FROM task_doc_llm")).scalar_one() == "kept"
    upgrade_schema(engine)
    require_schema(engine)
    got = SqlAlchemyTaskRepository(engine).get(task.task_id)
    assert got is not None and got.task_name == "kept" and got.fresh is False  # NULL after the column came back
    assert "review_cache" in inspect(engine).get_table_names()
