"""The SQL repository against a real MariaDB whose time zone is +08:00 (and SQLite where it differs).

What the contract tests cannot show: timestamps are UTC whatever the server's zone (D4), rows
written by existing producers are valid, the schema upgrade is idempotent and adopts a producer's
table, the reconciler's query is an index range (D8), and the database going away is survived
or reported as ``Unavailable``.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import event, inspect, text
from sqlalchemy.engine import make_url

from docllm.adapters.sql.engine import TransientRetry, make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository, non_terminal_page
from docllm.adapters.sql.schema import USAGE_COLUMNS, metadata
from docllm.domain.errors import Unavailable
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import StartResult, TaskStatus

PENDING, PROCESSING, SUCCESS, FAILED = TaskStatus


@pytest.fixture
def engine(mysql_url):
    engine = make_engine(mysql_url)
    upgrade_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def repo(engine):
    # Few, short tries: a stopped server is reported quickly.
    return SqlAlchemyTaskRepository(engine, retry=TransientRetry(tries=3, base_delay=0.05))


@pytest.fixture
def raw(mariadb_server, mysql_url):
    """A plain PyMySQL connection to the test database, as an existing producer would use."""
    with mariadb_server.connect(make_url(mysql_url).database) as conn:
        yield conn


def near_now(moment: datetime) -> bool:
    return abs(moment - datetime.now(UTC)) < timedelta(minutes=1)


# -- time -----------------------------------------------------------------------------------------


def test_timestamps_are_utc_although_the_server_is_at_plus_eight(repo, raw):
    with raw.cursor() as cur:
        cur.execute("SELECT TIMESTAMPDIFF(HOUR, UTC_TIMESTAMP(), NOW())")
        assert cur.fetchone()[0] == 8  # the trap of D4 is really there
    task = repo.create("t", "x")
    attempt = repo.start_attempt(task.task_id, "tok").task
    repo.commit(task.task_id, attempt.attempt, {"ok": True})
    done = repo.get(task.task_id)
    for moment in (done.created_at, done.updated_at, done.processing_started_at, done.finished_at):
        assert moment.tzinfo is UTC and near_now(moment)


def test_a_producer_row_with_only_name_status_and_document_is_valid(repo, raw):
    with raw.cursor() as cur:
        cur.execute(
            "INSERT INTO task_doc_llm (task_name, status, document) VALUES (%s, 'pending', %s)", ("legacy", "body")
        )
        task_id = cur.lastrowid
    task = repo.get(task_id)
    assert (task.task_name, task.status, task.attempt, task.retry_count) == ("legacy", PENDING, 0, 0)
    assert near_now(task.created_at) and near_now(task.updated_at)
    assert [t.task_id for t in repo.non_terminal_after(None, 10)] == [task_id]
    outcome = repo.start_attempt(task_id, "tok")
    assert outcome.result is StartResult.started and outcome.task.document == "body"


# -- schema ---------------------------------------------------------------------------------------


def test_upgrade_schema_is_idempotent_and_matches_the_model(engine, mysql_url):
    upgrade_schema(mysql_url)
    upgrade_schema(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0012"]
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        assert compare_metadata(context, metadata) == []


def test_workers_that_start_together_upgrade_once(mysql_url):
    errors: list[BaseException] = []

    def upgrade():
        try:
            upgrade_schema(mysql_url)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=upgrade) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_processes_that_start_together_upgrade_one_sqlite_file_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(upgrade_schema, [url] * 4)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0012"]
    engine.dispose()


def test_upgrade_schema_adopts_a_table_an_existing_producer_created(mysql_url, raw):
    with raw.cursor() as cur:
        cur.execute(
            "CREATE TABLE task_doc_llm (task_id BIGINT AUTO_INCREMENT PRIMARY KEY, task_name VARCHAR(255),"
            " status VARCHAR(16) NOT NULL DEFAULT 'pending', retry_count INT NOT NULL DEFAULT 0,"
            " document LONGTEXT, result LONGTEXT, processing_started_at DATETIME,"
            " created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
            " updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))"
        )
        cur.execute("INSERT INTO task_doc_llm (task_name, document) VALUES ('old', 'body')")
    upgrade_schema(mysql_url)
    upgrade_schema(mysql_url)
    engine = make_engine(mysql_url)
    try:
        inspector = inspect(engine)
        assert {"attempt", "lease_token", "max_attempts", "error", "finished_at", *USAGE_COLUMNS} <= {
            c["name"] for c in inspector.get_columns("task_doc_llm")
        }
        assert "ix_task_doc_llm_status_updated_at" in {i["name"] for i in inspector.get_indexes("task_doc_llm")}
        repo = SqlAlchemyTaskRepository(engine)
        [old] = repo.recent()
        assert (old.task_name, old.attempt, old.usage) == ("old", 0, None)
        attempt = repo.start_attempt(old.task_id, "tok").task
        assert repo.commit(old.task_id, attempt.attempt, {"ok": True}, usage=Usage(1, 5, 2, 0.5, "m", 0.001))
        assert repo.get(old.task_id).usage == Usage(1, 5, 2, 0.5, "m", 0.001)
    finally:
        engine.dispose()


def test_the_reconciler_query_is_an_index_range(engine, repo):
    tasks = [repo.create(f"t{i}", "x") for i in range(300)]
    for task in tasks[:290]:  # most rows are finished, as in production
        repo.start_attempt(task.task_id, "tok")
        repo.commit(task.task_id, 1, {})
    page = repo.non_terminal_after(None, 5)
    cursor = (page[-1].updated_at, page[-1].task_id)
    with engine.connect() as conn:
        conn.execute(text("ANALYZE TABLE task_doc_llm"))
        for status in (PENDING, PROCESSING):
            for at in (None, cursor):
                query = non_terminal_page(status, at, 50).compile(engine, compile_kwargs={"literal_binds": True})
                [plan] = conn.execute(text(f"EXPLAIN {query}")).mappings().all()
                assert plan["key"] == "ix_task_doc_llm_status_updated_at", plan
                assert plan["type"] in ("range", "ref"), plan
                assert "filesort" not in (plan["Extra"] or ""), plan


# -- transient errors -----------------------------------------------------------------------------


def test_a_restarted_server_is_survived(mariadb_server, repo):
    task = repo.create("before", "x")
    mariadb_server.restart()
    assert repo.get(task.task_id).task_name == "before"
    assert repo.start_attempt(task.task_id, "tok").result is StartResult.started


def test_a_stopped_server_is_unavailable(mariadb_server, repo):
    task = repo.create("t", "x")
    mariadb_server.stop()
    try:
        with pytest.raises(Unavailable):
            repo.get(task.task_id)
        with pytest.raises(Unavailable):
            repo.start_attempt(task.task_id, "tok")
    finally:
        mariadb_server.start()
    assert repo.get(task.task_id).status == PENDING


def test_a_lock_wait_timeout_is_retried(engine, raw):
    # Let the repository's sessions give up on a row lock after 1 s instead of 50.
    event.listen(engine, "connect", lambda dbapi, _: dbapi.cursor().execute("SET innodb_lock_wait_timeout = 1"))
    engine.dispose()
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        raw.rollback()  # the other transaction ends once the first try has timed out on its lock
        time.sleep(seconds)

    retry = TransientRetry(tries=4, base_delay=0.05, sleep=pause)
    repo = SqlAlchemyTaskRepository(engine, retry=retry)
    task = repo.create("locked", "x")
    attempt = repo.start_attempt(task.task_id, "tok").task
    with raw.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT * FROM task_doc_llm WHERE task_id = %s FOR UPDATE", (task.task_id,))
    assert repo.commit(task.task_id, attempt.attempt, {"ok": True})
    assert len(pauses) >= 1  # the first try timed out on the lock and a later one went through
    assert repo.get(task.task_id).status == SUCCESS


class AnswerLost(TransientRetry):
    """The write lands, then the connection drops before its answer arrives; the next try runs."""

    def __call__(self, fn, on_lost=None):
        fn()
        if on_lost is not None:
            on_lost()
        return fn()


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def any_engine(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield engine
    engine.dispose()


def test_a_write_whose_answer_was_lost_is_recognised(any_engine):
    setup = SqlAlchemyTaskRepository(any_engine)
    lossy = SqlAlchemyTaskRepository(any_engine, retry=AnswerLost())
    task = setup.create("t", "x")
    outcome = lossy.start_attempt(task.task_id, "tok")  # landed twice: the token recognises it
    assert (outcome.result, outcome.task.attempt) == (StartResult.started, 1)
    assert lossy.commit(task.task_id, 1, {"ok": True}, usage=Usage(2, 10, 4, 1.0, "m", 0.5))
    assert setup.get(task.task_id).status == SUCCESS
    assert setup.get(task.task_id).usage == Usage(2, 10, 4, 1.0, "m", 0.5)  # added once, not per try
    failing = setup.create("f", "x")
    setup.start_attempt(failing.task_id, "tok")
    assert lossy.fail(failing.task_id, 1, "boom")
    assert lossy.reopen(failing.task_id)
    assert lossy.delete(failing.task_id)
    with pytest.raises(Unavailable):  # an INSERT is not repeated: it could duplicate the task
        lossy.create("dup", "x")


def test_sqlite_waits_for_a_briefly_held_write_lock(tmp_path):
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    engine = make_engine(url)
    upgrade_schema(engine)
    repo = SqlAlchemyTaskRepository(engine)
    task = repo.create("t", "x")
    worker_id = sqlite3.connect(tmp_path / "tasks.db", isolation_level=None, check_same_thread=False)
    worker_id.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, worker_id.commit).start()
    attempt = repo.start_attempt(task.task_id, "tok").task
    assert attempt.attempt == 1
    worker_id.close()
    engine.dispose()


def test_make_engine_connects_to_nothing():
    engine = make_engine("mysql://nobody:secret@127.0.0.1:9/none")
    assert engine.url.drivername == "mysql+pymysql" and engine.url.query["charset"] == "utf8mb4"
    engine.dispose()


def test_one_in_memory_sqlite_database_is_shared_by_threads():
    engine = make_engine("sqlite://")
    upgrade_schema(engine)
    repo = SqlAlchemyTaskRepository(engine)

    def work(n):
        for i in range(20):
            task = repo.create(f"{n}-{i}", "x")
            attempt = repo.start_attempt(task.task_id, f"tok-{n}").task
            assert repo.commit(task.task_id, attempt.attempt, {"n": n})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert repo.counts()["success"] == 80
