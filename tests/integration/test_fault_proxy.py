"""The fault proxy's protocol rules on the real servers: a MariaDB COMMIT (and an autocommitted
UPDATE) and a Redis script land, and their replies never reach the client."""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.servers import MariaDBServer, RedisServer
from tests.servers.fault_proxy import FaultProxy
from tests.servers.wire import mysql_commit, redis_script


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    with FaultProxy() as p:
        yield p


def test_a_mariadb_commit_lands_and_its_reply_is_dropped(
    proxy: FaultProxy, mariadb_server: MariaDBServer, mysql_url: str
) -> None:
    db = mysql_url.rsplit("/", 1)[1].split("?")[0]
    with mariadb_server.connect(db) as direct, direct.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, status VARCHAR(16))")
        cur.execute("INSERT INTO t VALUES (1, 'processing'), (2, 'processing')")
    link = proxy.link("db", mariadb_server.host, mariadb_server.port, protocol="mysql")

    def through(autocommit: bool) -> pymysql.connections.Connection:
        return pymysql.connect(
            host=link.host, port=link.port, user=mariadb_server.user, password=mariadb_server.password,
            database=db, autocommit=autocommit, read_timeout=5,
        )  # fmt: skip

    link.drop_reply(mysql_commit(r"status\s*=\s*'success'"), times=2)
    conn = through(autocommit=False)
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t")  # neither a commit nor a match: answered
        cur.execute("UPDATE t SET status = 'success' WHERE id = 1")  # inside a transaction: answered
        with pytest.raises(pymysql.err.OperationalError) as lost:
            conn.commit()
    assert lost.value.args[0] in (2013, 2006)  # lost connection: the client cannot know it landed
    auto = through(autocommit=True)
    with auto.cursor() as cur, pytest.raises(pymysql.err.OperationalError):
        cur.execute("UPDATE t SET status = 'success' WHERE id = 2")  # commits on its own
    assert link.stats["dropped_replies"] == 2
    with mariadb_server.connect(db) as direct, direct.cursor() as cur:
        cur.execute("SELECT id, status FROM t ORDER BY id")
        assert cur.fetchall() == ((1, "success"), (2, "success"))  # both landed


def test_a_commit_into_a_blackhole_never_arrives_and_its_locks_stay(
    proxy: FaultProxy, mariadb_server: MariaDBServer, mysql_url: str
) -> None:
    db = mysql_url.rsplit("/", 1)[1].split("?")[0]
    with mariadb_server.connect(db) as direct, direct.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, status VARCHAR(16))")
        cur.execute("INSERT INTO t VALUES (1, 'processing')")
    link = proxy.link("db", mariadb_server.host, mariadb_server.port, protocol="mysql")
    link.blackhole_at(mysql_commit("success"))
    conn = pymysql.connect(
        host=link.host, port=link.port, user=mariadb_server.user, password=mariadb_server.password,
        database=db, read_timeout=1,
    )  # fmt: skip
    with conn.cursor() as cur:
        cur.execute("UPDATE t SET status = 'success' WHERE id = 1")
        with pytest.raises(pymysql.err.OperationalError):
            conn.commit()  # times out: no reply, no FIN
    with mariadb_server.connect(db) as direct, direct.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.innodb_trx t JOIN information_schema.processlist p "
            "ON p.id = t.trx_mysql_thread_id WHERE p.db = %s",
            (db,),
        )
        assert cur.fetchone() == (1,)  # the server still holds the transaction of a client that left
        cur.execute("SELECT status FROM t WHERE id = 1")
        assert cur.fetchone() == ("processing",)
    link.heal()  # the proxy resets the half-open connection: the server rolls it back


def test_a_redis_script_runs_and_its_reply_is_dropped(proxy: FaultProxy, redis_server: RedisServer) -> None:
    redis_server.start()
    link = proxy.link("redis", redis_server.host, redis_server.port, protocol="redis")
    client = redis.Redis(host=link.host, port=link.port, socket_timeout=2, retry=Retry(NoBackoff(), 0))
    client.delete("fault-proxy:n")
    link.drop_reply(redis_script())
    assert client.get("fault-proxy:n") is None  # not a script: answered
    with pytest.raises(redis.ConnectionError):
        client.eval("return redis.call('INCR', KEYS[1])", 1, "fault-proxy:n")
    assert client.eval("return redis.call('INCR', KEYS[1])", 1, "fault-proxy:n") == 2  # the first one ran
    assert link.stats["dropped_replies"] == 1
