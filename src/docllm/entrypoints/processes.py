"""``docllm worker --processes N|auto``: N worker processes on this host under one parent.

The parent starts each child as ``docllm worker --supervised`` (``subprocess``, not
``multiprocessing``: a child is the ordinary worker program, started fresh, with nothing inherited
but its environment), forwards SIGTERM/SIGINT, and serves the one HTTP port: ``/metrics`` summed
over the children through prometheus_client's multiprocess mode, ``/healthz`` from the
supervisor. The decisions are ``runtime.supervisor.Supervisor``'s.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from docllm.entrypoints.signal_wake import SignalWake

if TYPE_CHECKING:  # the CLI imports this module for parse_processes: nothing heavy at import
    from docllm.adapters.host.cpus import CpuBudget
    from docllm.adapters.telemetry.metrics_folding import FoldedMetrics
    from docllm.runtime.supervisor import Supervisor
    from docllm.settings import Settings

log = logging.getLogger("docllm.supervisor")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
AUTO = "auto"
MAX_PER_CPU = 4  # --processes N above this many per usable CPU is refused
METRICS_PREFIX = "docllm-metrics-"  # + the parent's pid: its multiprocess directory


def parse_processes(text: str) -> int | str:
    """``--processes``: a whole number of at least 1, or ``auto`` (resolved by ``resolve_processes``
    at start, from the CPUs this process may use)."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (a whole number >= 1, or auto)")
    return n


def resolve_processes(asked: int | str, budget: CpuBudget) -> int:
    """How many worker processes to run: ``auto`` is the usable CPUs (the cgroup quota or the
    affinity mask, whichever is smaller); a number above ``MAX_PER_CPU`` per usable CPU is
    refused (``ValueError``, one line): each process is a whole worker (its memory, its
    DOCLLM_CONCURRENCY database connections), and more than the CPUs only throttles them."""
    if asked == AUTO:
        return budget.usable
    n = int(asked)
    bound = MAX_PER_CPU * budget.usable
    if n > bound:
        raise ValueError(
            f"--processes {n} is more than {MAX_PER_CPU} per usable CPU ({budget.describe()}): "
            f"use at most {bound}, or raise DOCLLM_CONCURRENCY"
        )
    return n


def run(settings: Settings, processes: int) -> int:
    from docllm.adapters.telemetry.metrics_folding import FoldedMetrics
    from docllm.logs import setup_logging
    from docllm.runtime.supervisor import Supervisor, child_stop_seconds

    setup_logging(settings.log_format, settings.log_level)
    if settings.dashboard_on_worker:
        print(
            "docllm: --processes serves no dashboard on the workers (DOCLLM_DASHBOARD_ON_WORKER): "
            "run `docllm dashboard` beside them",
            file=sys.stderr,
        )
        return 2
    remove_dead_parents_metrics(tempfile.gettempdir())
    metrics_dir = None
    if settings.metrics_port is not None:
        metrics_dir = tempfile.mkdtemp(prefix=metrics_directory_prefix())
    env = {**os.environ}
    if metrics_dir is not None:
        env[MULTIPROC_ENV] = metrics_dir

    folded = FoldedMetrics(metrics_dir) if metrics_dir is not None else None
    parent = str(os.getpid())

    def spawn(slot: int, worker_id: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "docllm.entrypoints.cli", "worker", "--supervised", "--parent-pid", parent]
        return subprocess.Popen(argv, env={**env, "DOCLLM_WORKER_ID": worker_id}, stdin=subprocess.DEVNULL)  # noqa: S603

    supervisor = Supervisor(
        processes,
        settings.worker_id,
        spawn,
        time.monotonic,
        child_stop_seconds(settings),
        on_exit=folded.fold if folded is not None else lambda pid: None,
    )
    signals: list[int] = []
    # The handlers take no lock (SignalWake): each signal wakes the loop through a pipe.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda sig, _frame: signals.append(sig))
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a child exited: look now, not at the next tick
    wake = SignalWake().open()
    endpoints = None
    try:
        endpoints = _endpoints(settings, supervisor, folded)  # a port already taken: no child starts
        supervisor.start()
        while not supervisor.done:
            while signals:
                supervisor.stop(signals.pop(0))
            wake.wait(supervisor.step())
    finally:
        wake.close()
        if supervisor.alive:  # the parent failed: its children must not run on
            supervisor.stop()
        if endpoints is not None:
            endpoints.stop()
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    log.info("stopped")
    return 1 if supervisor.killed else 0


def remove_dead_parents_metrics(directory: str) -> list[str]:
    """A SIGKILLed parent leaves its metrics directory behind (its children stop with it): remove
    those of parents no longer running. A directory is named by its parent's pid and start time; it
    stays only while that very process runs. In a container the parent is PID 1 at every start, so
    a pid alone would keep the previous run's for good; one with this process's own pid is always
    stale (this runs before this process makes its own)."""
    removed = []
    for path in glob.glob(os.path.join(directory, f"{METRICS_PREFIX}*-*")):
        parts = os.path.basename(path)[len(METRICS_PREFIX) :].split("-")
        if not parts[0].isdigit():
            continue
        pid = int(parts[0])
        started = parts[1] if len(parts) >= 3 and parts[1].isdigit() else None
        if pid != os.getpid() and _running(pid) and (started is None or started == _start_time(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        log.info("removed the metrics directories of %d parents no longer running", len(removed))
    return removed


def metrics_directory_prefix() -> str:
    """This parent's directory name: its pid and start time, then mkdtemp's random part."""
    return f"{METRICS_PREFIX}{os.getpid()}-{_start_time(os.getpid()) or '0'}-"


def _start_time(pid: int) -> str | None:
    """When ``pid`` started, in clock ticks since boot (proc(5), stat field 22); None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _endpoints(settings: Settings, supervisor: Supervisor, folded: FoldedMetrics | None) -> Any:
    """The host's one HTTP port: the children's metrics summed (the dead's folded in), the
    supervisor's health."""
    if settings.metrics_port is None or folded is None:
        return None
    from prometheus_client import CollectorRegistry

    from docllm.runtime.http_endpoints import HttpEndpoints

    registry = CollectorRegistry()
    registry.register(folded)
    checks = {"workers": supervisor.require_all_alive}
    return HttpEndpoints(settings.metrics_host, settings.metrics_port, registry, supervisor.health, checks).start()
