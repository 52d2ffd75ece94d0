"""One program of the end-to-end tests, with its log file: start, SIGKILL, SIGTERM, restart."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import local_ports
from tests.e2e.harness.env import ROOT


def _pdeathsig() -> Callable[[], None] | None:
    """Children die with the test process (SIGKILL from the kernel), even if it is SIGKILLed."""
    from tests.servers.procs import _make_preexec

    return _make_preexec(os.getpid())


@dataclass
class Proc:
    """One program with its log file (appended to across restarts)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    kind: str = "process"
    popen: subprocess.Popen[bytes] | None = None
    incarnation: int = 0
    started_at: float = 0.0  # monotonic
    worker_id: str = ""  # DOCLLM_WORKER_ID of the current incarnation
    log_offset: int = 0  # where the current incarnation's log lines begin

    def start(self) -> Proc:
        if self.alive:
            return self
        self.incarnation += 1
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = dict(self.env)
        if self.kind in ("worker", "reaper"):
            self.worker_id = env.setdefault("DOCLLM_WORKER_ID", f"{self.name}.{self.incarnation}")
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(  # noqa: S603 - argv built by the tests
                self.argv,
                env=env,
                cwd=str(ROOT),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_pdeathsig(),
            )
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def kill(self) -> None:
        """SIGKILL and reap: a crash at whatever moment the process is in."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
        if self.popen is not None:
            self.popen.wait()

    def terminate(self) -> None:
        """SIGTERM, without waiting."""
        if self.alive:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None when it is still running after ``timeout`` seconds."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = 15.0) -> int | None:
        self.terminate()
        code = self.wait(timeout)
        if code is None:
            self.kill()
        return code

    def current_log(self) -> str:
        """What the current incarnation has logged so far."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def serving(self) -> bool:
        """A docllm program that has installed its signal handlers and started its loops."""
        return self.alive and '"message": "starting: ' in self.current_log()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30, width: int = 400) -> str:
        return "\n".join(line[:width] for line in self.log_text().splitlines()[-lines:])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may contain spaces
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def tcp_ports(pid: int) -> set[int]:
    """The local ports of a process's TCP sockets, from /proc: which process holds the client end
    of a connection a server saw (its peer port). The benchmarks' reading, shared."""
    return local_ports(pid)
