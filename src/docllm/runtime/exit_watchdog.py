"""A stopped process exits: once the service has stopped, whatever still holds the process (a
resource's close, the interpreter joining a thread blocked on a socket) gets a short while, then
every thread's stack goes to the log and the process exits. Every write is fenced, so cutting a
blocked call short loses nothing; a stop that hangs would instead outlive the orchestrator's
timeout and be SIGKILLed with no trace of why (a CI chaos run saw a worker exit 5 s after its
"stopped" line, cause unknown: this dump is how the next one will be explained)."""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading

log = logging.getLogger("docllm.service")

EXIT_SECONDS = 1.0


def arm(seconds: float = EXIT_SECONDS) -> None:
    """Exit (status 0) ``seconds`` from now if the process is still running then."""

    def expire() -> None:
        log.warning("the process had not exited %.1fs after it stopped; its threads' stacks follow", seconds)
        for handler in logging.getLogger().handlers:
            handler.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.name = "exit-watchdog"
    timer.start()
