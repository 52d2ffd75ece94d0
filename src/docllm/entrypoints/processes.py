"""``docllm worker --processes N|auto``: N worker processes on this host under one parent.

The parent starts each child as ``docllm worker --supervised`` (``subprocess``, not
``multiprocessing``: a child is the ordinary worker program, started fresh, with nothing inherited
but its environment), forwards SIGTERM/SIGINT, and serves the one HTTP port: ``/metrics`` summed
over the children through prometheus_client's multiprocess mode, ``/healthz`` from the
supervisor. The decisions are ``runtime.supervisor.Supervisor``'s.
"""

from __future__ import annotations

import argparse
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
    from docllm.runtime.supervisor import Supervisor
    from docllm.settings import Settings

log = logging.getLogger("docllm.supervisor")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def parse_processes(text: str) -> int:
    """``--processes``: a whole number of at least 1, or ``auto`` (the cores this process may use)."""
    if text.strip().lower() == "auto":
        return len(os.sched_getaffinity(0))
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (a whole number >= 1, or auto)")
    return n


def run(settings: Settings, processes: int) -> int:
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
    metrics_dir = tempfile.mkdtemp(prefix="docllm-metrics-") if settings.metrics_port is not None else None
    env = {**os.environ}
    if metrics_dir is not None:
        env[MULTIPROC_ENV] = metrics_dir

    def spawn(slot: int, worker_id: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "docllm.entrypoints.cli", "worker", "--supervised"]
        return subprocess.Popen(argv, env={**env, "DOCLLM_WORKER_ID": worker_id}, stdin=subprocess.DEVNULL)  # noqa: S603

    supervisor = Supervisor(
        processes,
        settings.worker_id,
        spawn,
        time.monotonic,
        child_stop_seconds(settings),
        on_exit=(lambda pid: _mark_dead(pid, metrics_dir)) if metrics_dir else lambda pid: None,
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
        endpoints = _endpoints(settings, supervisor, metrics_dir)  # a port already taken: no child starts
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


def _mark_dead(pid: int, path: str) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, path)


def _endpoints(settings: Settings, supervisor: Supervisor, metrics_dir: str | None) -> Any:
    """The host's one HTTP port: the children's metrics summed, the supervisor's health."""
    if settings.metrics_port is None or metrics_dir is None:
        return None
    from prometheus_client import CollectorRegistry, multiprocess

    from docllm.runtime.http_endpoints import HttpEndpoints

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=metrics_dir)
    checks = {"workers": supervisor.require_all_alive}
    return HttpEndpoints(settings.metrics_host, settings.metrics_port, registry, supervisor.health, checks).start()
