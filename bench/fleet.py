"""A fleet of ``docllm worker`` processes on this host for the capacity benchmark: grown in steps,
read per process (RSS, PSS, CPU), and always stopped, every process reaped.

Each process is the shipped CLI (``docllm worker``: slots, reaper and reconciler loops, registry
beat) in a session of its own with its own ``DOCLLM_WORKER_ID``; it counts as started once its
registry record is in Redis (``RedisKeys.workers``), which it writes after its schema check.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.common import PYTHON, cpu_seconds, kill, rss_kib, spawn, tail, wait_for

STOP_MARGIN_S = 30.0  # past the workers' own shutdown grace, before SIGKILL
START_S_PER_PROCESS = 3.0  # imports and schema check of one process on a shared 2-core machine


def pss_kib(pid: int) -> int | None:
    """Proportional set size: shared pages (the interpreter, libraries) split among their users."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Fleet:
    def __init__(self, run_env: dict[str, str], registry_key: str, client, logs: Path, grace_s: float):
        self.run_env, self.registry_key, self.client = run_env, registry_key, client
        self.logs, self.grace_s = logs, grace_s
        self.procs: list[subprocess.Popen] = []
        logs.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _log(self, i: int) -> Path:
        return self.logs / f"worker-{i}.log"

    def grow(self, size: int) -> float:
        """Start processes until there are ``size``; returns the seconds until all had registered."""
        t0 = time.monotonic()
        new = size - len(self.procs)
        for i in range(len(self.procs), size):
            self.procs.append(spawn([PYTHON, "-m", "docllm.entrypoints.cli", "worker"], self._env(i), self._log(i)))

        def registered() -> bool:
            self.check()
            return self.client.zcard(self.registry_key) >= size

        wait_for(registered, 60 + START_S_PER_PROCESS * max(new, 0), 0.2, f"{size} workers registered")
        return time.monotonic() - t0

    def _env(self, i: int) -> dict[str, str]:
        return {**self.run_env, "DOCLLM_WORKER_ID": f"capacity-{i}"}

    def check(self) -> None:
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                raise RuntimeError(f"worker {i} exited with {p.returncode}:\n{tail(self._log(i))}")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) or 0.0 for pid in self.pids)

    def memory_kib(self) -> dict[str, float]:
        """Mean RSS and PSS per process."""
        n = max(1, len(self.pids))
        return {
            "rss": sum(rss_kib(pid) or 0 for pid in self.pids) / n,
            "pss": sum(pss_kib(pid) or 0 for pid in self.pids) / n,
        }

    def stop(self) -> list[int]:
        """SIGTERM to all at once, then SIGKILL to any still running after the grace; every child
        reaped. Returns the pids that needed the SIGKILL."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + self.grace_s + STOP_MARGIN_S
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        killed = [p.pid for p in self.procs if p.poll() is None]
        for p in self.procs:
            kill(p)  # the whole group, reaped (a no-op on an exited child)
        return killed
