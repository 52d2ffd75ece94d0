"""Child processes of the test session that can never outlive it.

Three layers, so that no redis-server or mariadbd is left behind:

1. the fixtures stop their server in a finalizer (normal end, failures, Ctrl-C);
2. an ``atexit`` hook stops (closes) every server still registered when the interpreter exits;
3. each server is started with ``PR_SET_PDEATHSIG = SIGKILL`` (Linux), so the kernel kills it
   when the Python process dies without running ``atexit`` (SIGKILL, ``os._exit``).

The servers run in their own session, so a Ctrl-C in the terminal does not kill them behind
the fixtures' back while tests are still running.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

_PR_SET_PDEATHSIG = 1

try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
except OSError:  # not glibc/Linux: rely on the finalizers and atexit
    _LIBC = None


class ServerNotInstalled(RuntimeError):
    """The server binary is missing (the fixtures skip locally and fail in CI)."""


class ServerFailedToStart(RuntimeError):
    """The binary exists but the server did not come up; the message ends with its log."""


class Stoppable(Protocol):
    def stop(self) -> None: ...

    def close(self) -> None: ...


_servers: list[Stoppable] = []
_servers_lock = threading.Lock()


def register(server: Stoppable) -> None:
    """Close ``server`` (stop it, remove a directory it created) at interpreter exit."""
    with _servers_lock:
        if not any(s is server for s in _servers):
            _servers.append(server)


def unregister(server: Stoppable) -> None:
    with _servers_lock:
        _servers[:] = [s for s in _servers if s is not server]


@atexit.register
def _stop_all_at_exit() -> None:
    with _servers_lock:
        servers = list(reversed(_servers))
        _servers.clear()
    for server in servers:
        try:
            server.close()
        except Exception:  # noqa: BLE001 - best effort at exit, then the next one
            pass


def _make_preexec(parent_pid: int) -> Callable[[], None] | None:
    # PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process.
    # Only arm it when the fork happens on the main thread; otherwise a server started from a
    # helper thread would die with that thread. atexit and the finalizers still cover it.
    if _LIBC is None or threading.current_thread() is not threading.main_thread():
        return None
    libc = _LIBC

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def spawn(argv: Sequence[str], log_path: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout/stderr appended to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(  # noqa: S603 - fixed argv built by the servers
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            preexec_fn=_make_preexec(os.getpid()),
            close_fds=True,
        )


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; always reaps the process."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            pass
    kill(proc)


def kill(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL and reap."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    proc.wait()


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def port_conflict(log_path: Path, offset: int) -> bool:
    """Did the start that logged from ``offset`` on fail because its port was taken?"""
    try:
        with open(log_path, "rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return False
    return "already in use" in text.lower() or "errno: 98" in text.lower()


def run(argv: Sequence[str], log_path: Path, timeout: float) -> int:
    """Run a helper program (and whatever it starts) to completion; returns its exit code.

    It runs in its own process group, which is killed as a whole on timeout, Ctrl-C or any
    other exception, so that no grandchild (mariadb-install-db's bootstrap server) survives.
    """
    proc = spawn(argv, log_path)
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    finally:
        try:  # nothing of the group may outlive the helper
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class ManagedServer:
    """The process lifecycle every test server shares; a subclass provides ``start`` (and may add
    folders to ``_scratch`` for ``close`` to remove)."""

    _proc: subprocess.Popen[bytes] | None
    stop_timeout: float
    directory: Path
    _owns_directory: bool
    _scratch: tuple[Path, ...] = ()

    def start(self):  # pragma: no cover - every server defines its own
        raise NotImplementedError

    def stop(self) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after ``stop_timeout``."""
        terminate(self._proc, self.stop_timeout)
        self._proc = None

    def kill(self) -> None:
        """SIGKILL: a crash."""
        kill(self._proc)
        self._proc = None

    def restart(self):
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, forget, and remove the folders this object created."""
        self.stop()
        unregister(self)
        for path in self._scratch + ((self.directory,) if self._owns_directory else ()):
            shutil.rmtree(path, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
