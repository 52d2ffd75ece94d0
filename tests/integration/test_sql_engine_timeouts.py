"""A MariaDB connection that goes half-open in the middle of a transaction (its COMMIT never
arrives, through the fault proxy): the client's read timeout fires, and the server ends the
abandoned transaction soon after, so its row locks do not outlive the client for hours."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from docllm.adapters.sql.engine import make_engine
from tests.servers import MariaDBServer
from tests.servers.fault_proxy import FaultProxy
from tests.servers.wire import mysql_commit


def test_an_abandoned_transaction_releases_its_row_locks(mariadb_server: MariaDBServer, mysql_url: str) -> None:
    with FaultProxy() as proxy:
        link = proxy.link("db", mariadb_server.host, mariadb_server.port, protocol="mysql")
        engine = make_engine(mysql_url.replace(f":{mariadb_server.port}/", f":{link.port}/"), io_timeout=1)
        direct = make_engine(mysql_url)
        with direct.begin() as conn:
            conn.execute(sa.text("CREATE TABLE t (id INT PRIMARY KEY, status VARCHAR(16))"))
            conn.execute(sa.text("INSERT INTO t VALUES (1, 'processing')"))
        link.blackhole_at(mysql_commit("success"))
        with pytest.raises(sa.exc.OperationalError), engine.begin() as conn:
            conn.execute(sa.text("UPDATE t SET status = 'success' WHERE id = 1"))
        began = time.monotonic()
        with direct.begin() as conn:  # waits for the lock the vanished client held
            conn.execute(sa.text("SET SESSION innodb_lock_wait_timeout = 30"))
            assert conn.execute(sa.text("UPDATE t SET status = 'pending' WHERE id = 1")).rowcount == 1
        assert time.monotonic() - began < 10  # about 2 x the I/O timeout after the commit was sent
        assert link.stats["blackholed_requests"] == 1
        engine.dispose()
        direct.dispose()
