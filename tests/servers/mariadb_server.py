"""A real MariaDB server on a free loopback port, with a private datadir.

No systemd, no /etc/mysql, no /var/lib/mysql: ``--no-defaults`` everywhere, the datadir is
initialised once with ``mariadb-install-db`` and the ``docllm``/``docllm`` user (all privileges,
from any host) is created at every start by an idempotent ``--init-file``. Small and fast: a
fresh datadir takes about 0.6 s and a start about 0.3 s.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql

from . import procs
from .ports import LOOPBACK, free_port
from .procs import ServerFailedToStart, ServerNotInstalled

SYSTEM_MARIADBD = "/usr/sbin/mariadbd"
SYSTEM_INSTALL_DB = "/usr/bin/mariadb-install-db"

NOT_INSTALLED = "mariadb-server not installed: run scripts/test to install it"

USER = "docllm"
PASSWORD = "docllm"
TIME_ZONE = "+08:00"  # like the production DB: NOW() is not UTC (D4, ARCHITECTURE.md)

_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")

# Options that shape the on-disk files: the same for mariadb-install-db and mariadbd.
_STORAGE_OPTIONS = [
    "--innodb-log-file-size=8M",
    "--innodb-data-file-path=ibdata1:10M:autoextend",
    "--innodb-buffer-pool-size=64M",
]


def _executable(path: str) -> str | None:
    return path if os.access(path, os.X_OK) else None


def find_mariadbd() -> str | None:
    return (
        os.environ.get("DOCLLM_TEST_MARIADBD")
        or _executable(SYSTEM_MARIADBD)
        or shutil.which("mariadbd")
        or shutil.which("mysqld")
    )


def find_install_db() -> str | None:
    return (
        os.environ.get("DOCLLM_TEST_MARIADB_INSTALL_DB")
        or _executable(SYSTEM_INSTALL_DB)
        or shutil.which("mariadb-install-db")
        or shutil.which("mysql_install_db")
    )


class MariaDBServer(procs.ManagedServer):
    """One mariadbd process, restartable on the same port and datadir."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        mariadbd: str | None = None,
        install_db: str | None = None,
        port: int | None = None,
        host: str = LOOPBACK,
        start_timeout: float = 60.0,
        stop_timeout: float = 60.0,
    ) -> None:
        self.mariadbd = mariadbd or find_mariadbd()
        self.install_db = install_db or find_install_db()
        if not (self.mariadbd and os.access(self.mariadbd, os.X_OK)) or not (
            self.install_db and os.access(self.install_db, os.X_OK)
        ):
            raise ServerNotInstalled(NOT_INSTALLED)
        self._owns_directory = directory is None
        self.directory = (
            Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="docllm-mariadb-"))
        ).resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.datadir = self.directory / "data"
        self.socket = self.directory / "mysqld.sock"
        self._socket_dir: Path | None = None
        if len(str(self.socket)) > 100:  # sun_path is 108 bytes
            self._socket_dir = Path(tempfile.mkdtemp(prefix="docllm-my-", dir="/tmp"))
            self.socket = self._socket_dir / "mysqld.sock"
            self._scratch = (self._socket_dir,)
        self.pid_file = self.directory / "mysqld.pid"
        self.log_path = self.directory / "error.log"
        self.install_log = self.directory / "install.log"
        self.init_file = self.directory / "init.sql"
        self.host = host
        self._port_fixed = port is not None
        self.port: int = port if port is not None else free_port(host)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.user = USER
        self.password = PASSWORD
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_once = False

    # -- addresses ------------------------------------------------------------------------------

    def url_for(self, dbname: str) -> str:
        """SQLAlchemy URL for ``dbname`` as the docllm user over TCP (PyMySQL, utf8mb4)."""
        return f"mysql+pymysql://{self.user}:{self.password}@{self.host}:{self.port}/{dbname}?charset=utf8mb4"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.is_running else None  # type: ignore[union-attr]

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def connect(self, database: str | None = None, **kwargs: Any) -> pymysql.connections.Connection:
        """A new autocommit PyMySQL connection as the docllm user over TCP."""
        kwargs.setdefault("connect_timeout", 5)
        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("charset", "utf8mb4")
        return pymysql.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, database=database, **kwargs
        )

    # -- databases ------------------------------------------------------------------------------

    @staticmethod
    def _check_name(name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(f"database name must match {_NAME.pattern}: {name!r}")
        return name

    def create_database(self, name: str) -> str:
        """CREATE DATABASE (utf8mb4); returns its SQLAlchemy URL."""
        self._check_name(name)
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE IF EXISTS, killing connections that still hold locks in it."""
        self._check_name(name)
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 5")
            try:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
                return
            except pymysql.err.OperationalError as exc:
                if exc.args and exc.args[0] != 1205:  # ER_LOCK_WAIT_TIMEOUT
                    raise
            # A test left a transaction open in this database: end its connections.
            cur.execute(
                "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()", (name,)
            )
            for (conn_id,) in cur.fetchall():
                try:
                    cur.execute(f"KILL CONNECTION {int(conn_id)}")
                except pymysql.err.OperationalError:
                    pass  # already gone
            cur.execute("SET SESSION lock_wait_timeout = 60")
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")

    # -- lifecycle ------------------------------------------------------------------------------

    def _initialise(self) -> None:
        if (self.datadir / "mysql").is_dir():
            return
        shutil.rmtree(self.datadir, ignore_errors=True)  # a half-done earlier attempt
        assert self.install_db is not None  # checked in __init__
        argv = [
            self.install_db,
            "--no-defaults",
            "--user=root",
            f"--datadir={self.datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            "--innodb-use-native-aio=0",
            f"--tmpdir={self.directory}",
            *_STORAGE_OPTIONS,
        ]
        self.install_log.unlink(missing_ok=True)
        try:
            # One bootstrap at a time on this machine: test processes that bootstrapped at the same
            # moment failed with "Unknown table 'mysql.tmp_proxies_priv'".
            with open("/tmp/docllm-mariadb-install.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                returncode = procs.run(argv, self.install_log, timeout=300)
        except subprocess.TimeoutExpired as exc:
            raise ServerFailedToStart(f"mariadb-install-db timed out:\n{procs.tail(self.install_log)}") from exc
        if returncode != 0:
            raise ServerFailedToStart(f"mariadb-install-db failed with {returncode}:\n{procs.tail(self.install_log)}")
        # The bootstrap runs with the grant tables off, so the user is created at start instead.
        self.init_file.write_text(
            f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';\n"
            f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%' WITH GRANT OPTION;\n"
        )

    def _argv(self) -> list[str]:
        assert self.mariadbd is not None
        return [
            self.mariadbd,
            "--no-defaults",  # must come first: ignore /etc/mysql/my.cnf and ~/.my.cnf
            "--user=root",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--socket={self.socket}",
            f"--datadir={self.datadir}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.log_path}",
            f"--init-file={self.init_file}",
            f"--default-time-zone={TIME_ZONE}",
            "--skip-name-resolve",
            "--max-allowed-packet=64M",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            *_STORAGE_OPTIONS,
            # small and fast; durability against SIGKILL of mariadbd is kept (the log is written
            # to the OS at each commit, only an OS crash could lose the last second)
            "--innodb-flush-log-at-trx-commit=2",
            "--innodb-doublewrite=0",
            "--innodb-use-native-aio=0",  # io_uring/libaio are often blocked in containers
            "--innodb-buffer-pool-dump-at-shutdown=0",
            "--innodb-buffer-pool-load-at-startup=0",
            "--performance-schema=OFF",
            "--skip-log-bin",
            "--max-connections=500",
        ]

    def start(self) -> MariaDBServer:
        """Start if not running (initialising the datadir the first time) and wait until the
        docllm user can connect over TCP. No-op when already running."""
        if self.is_running:
            return self
        self._initialise()
        attempts = 1 if (self._port_fixed or self._started_once) else 5
        for attempt in range(attempts):
            log_offset = procs.size(self.log_path)
            self._proc = procs.spawn(self._argv(), self.directory / "mariadbd.out", cwd=self.directory)
            procs.register(self)
            try:
                self._wait_ready()
            except ServerFailedToStart:
                procs.kill(self._proc)
                self._proc = None
                if attempt + 1 < attempts and procs.port_conflict(self.log_path, log_offset):
                    self.port = free_port(self.host)
                    continue
                raise
            self._started_once = True
            return self
        raise AssertionError("unreachable")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise ServerFailedToStart(
                    f"mariadbd exited with {self._proc.returncode} on port {self.port}:\n{procs.tail(self.log_path)}"
                )
            try:
                with self.connect(connect_timeout=1, read_timeout=5) as conn, conn.cursor() as cur:
                    cur.execute("SELECT 1")
                    return
            except pymysql.err.MySQLError as exc:
                last = exc
            time.sleep(0.02)
        raise ServerFailedToStart(
            f"mariadbd on port {self.port} did not accept the docllm user within {self.start_timeout}s ({last!r}):\n"
            f"{procs.tail(self.log_path)}"
        )

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running else "stopped"
        return f"<MariaDBServer {self.host}:{self.port} {state} datadir={self.datadir}>"
