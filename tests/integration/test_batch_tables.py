"""Migration 0009 (the batch lane's tables, issue 28) on SQLite and a real MariaDB: it matches the
model, goes down to 0008 leaving the task table and its rows alone, and comes back up; run over
tables a half-finished earlier run left, it adopts them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from docllm.adapters.sql.batches import SqlAlchemyBatchStore
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import alembic_config, upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.schema import metadata

TABLES = {"llm_batches", "llm_batch_tasks"}


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


def version(engine: Engine) -> str:
    with engine.connect() as conn:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()


def test_the_batch_tables_match_the_model(engine):
    upgrade_schema(engine)
    upgrade_schema(engine)  # idempotent
    assert version(engine) == "0012" and set(inspect(engine).get_table_names()) >= TABLES
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        assert compare_metadata(context, metadata) == []


def test_down_to_0008_and_up_again_keeps_the_tasks(engine):
    upgrade_schema(engine)
    task = SqlAlchemyTaskRepository(engine).create("kept", "body")
    SqlAlchemyBatchStore(engine).open("r" * 32, "gpt", [(task.task_id, 1)], 1_700_000_000_000)
    downgrade(engine, "0008")
    assert version(engine) == "0008" and not TABLES & set(inspect(engine).get_table_names())
    with engine.connect() as conn:  # read as the 0008 schema has it (this version's rows have 0011's column)
        assert conn.execute(text("SELECT task_name FROM task_doc_llm")).scalar_one() == "kept"
    upgrade_schema(engine)
    assert version(engine) == "0012" and SqlAlchemyBatchStore(engine).unfinished() == []


def test_an_upgrade_adopts_batch_tables_already_there(engine):
    upgrade_schema(engine, "0008")
    # What a run that died after its DDL leaves (MySQL's DDL commits at once): the tables, no version.
    metadata.tables["llm_batches"].create(engine)
    metadata.tables["llm_batch_tasks"].create(engine)
    upgrade_schema(engine)
    assert version(engine) == "0012"
    store = SqlAlchemyBatchStore(engine)
    store.open("r" * 32, "gpt", [(1, 1)], 1_700_000_000_000)
    assert store.get("r" * 32).tasks == 1


def test_0010_adds_the_batches_chunking_and_down_to_0009_drops_it_keeping_the_batches(engine):
    upgrade_schema(engine)
    SqlAlchemyBatchStore(engine).open("r" * 32, "gpt", [(1, 1)], 1_700_000_000_000, max_chunk_chars=4000)
    downgrade(engine, "0009")
    assert version(engine) == "0009"
    assert "max_chunk_chars" not in {c["name"] for c in inspect(engine).get_columns("llm_batches")}
    upgrade_schema(engine)
    got = SqlAlchemyBatchStore(engine).get("r" * 32)
    assert got is not None and got.tasks == 1 and got.max_chunk_chars is None  # a batch from before: not known
