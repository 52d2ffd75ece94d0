"""A stopped process exits: once the service has stopped, whatever still holds the process (a
resource's close, the interpreter joining a thread blocked on a socket) gets a short while, then
every thread's stack goes to the log (stderr) and the process exits. Every write is fenced, so
cutting a blocked call short loses nothing; a stop that hangs would instead outlive the
orchestrator's timeout and be SIGKILLed with no trace of why. The dump says what held it.

The first stage writes with ``os.write`` and ``faulthandler``, which take no lock a stuck thread
could hold (logging's would); the second, in case the first never runs (a thread holding the GIL
in C code), is faulthandler's own C watchdog thread, which needs no GIL and exits with status 1.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading

EXIT_SECONDS = 1.0
_STDERR = 2


def arm(seconds: float = EXIT_SECONDS) -> None:
    """Exit (status 0) ``seconds`` from now if the process is still running then."""

    def expire() -> None:
        os.write(_STDERR, f"docllm: the process had not exited {seconds:.1f}s after it stopped; stacks:\n".encode())
        faulthandler.dump_traceback(file=_STDERR, all_threads=True)
        os._exit(0)

    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    faulthandler.dump_traceback_later(seconds + 1.0, exit=True, file=_STDERR)
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.name = "exit-watchdog"
    timer.start()
