"""A child of ``docllm worker --processes`` stops when its parent dies.

Children outlive a SIGKILLed parent wherever nothing kills the whole group (outside Docker,
Kubernetes and systemd's default kill mode), and a restarted parent would start a second fleet
beside them. Two guards, each enough alone:

- Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``): the kernel sends ``sig`` the moment
  the parent's thread that started the child ends (the supervisor starts every child from its main
  thread, which lives as long as the parent).
- A thread that compares ``os.getppid()`` with the parent's pid every ``every_s`` seconds: any
  other OS, and the race where the parent died before the child asked for the signal.

``sig`` is SIGTERM: the child drains as on any stop (its attempts get the shutdown grace, then go
back to ready), bounded by its own exit watchdog.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
import time

log = logging.getLogger("docllm.supervisor")

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
CHECK_SECONDS = 1.0


def stop_with_parent(parent_pid: int, sig: int = signal.SIGTERM, every_s: float = CHECK_SECONDS) -> None:
    parent_death_signal(sig)
    threading.Thread(target=_watch, args=(parent_pid, sig, every_s), name="docllm-parent-watch", daemon=True).start()


def parent_death_signal(sig: int) -> bool:
    """Ask the kernel for ``sig`` when the parent dies; False where that is not offered."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int, sig: int, every_s: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(every_s)
    log.warning("the parent process (pid %d) is gone: stopping", parent_pid)
    os.kill(os.getpid(), sig)
