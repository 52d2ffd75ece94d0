"""``python -m docllm.entrypoints.worker``: worker slots plus the reaper and reconciler loops."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import NoReturn

from docllm.domain.errors import DocllmError, Unavailable
from docllm.entrypoints.bootstrap import build_container, build_service, load_settings, prepare_schema
from docllm.runtime.outage import Outage


def main(workers: bool = True, reaper: bool = True, http: bool = True) -> int:
    """``http=False``: a child of ``docllm worker --processes``, whose parent serves the HTTP port."""
    container = build_container(load_settings())
    outage = Outage("database", logging.getLogger("docllm.service"))
    while True:  # a database that is down at start is waited for; a missing schema stops the program
        try:
            prepare_schema(container)
            break
        except Unavailable as exc:
            time.sleep(outage.failed(exc))
        except DocllmError as exc:
            print(f"docllm: {exc}", file=sys.stderr)
            return 1
    outage.ok()
    service = build_service(container, workers=workers, reaper=reaper, http=http)
    service.run_forever()
    if service.calls.busy:
        # A port call still blocks on a socket that does not answer (up to its timeout). Closing
        # the pools under it would wait for it; every write is fenced, so leave it (the OS closes
        # the sockets).
        logging.getLogger("docllm.service").warning("exiting with %d port calls still blocked", service.calls.busy)
    else:
        container.shutdown_resources()
    _leave(0)


def _leave(code: int) -> NoReturn:
    """Exit without the interpreter's finalization: what needed closing is closed (or left on
    purpose), and finalization can wait on threads still blocked, or hang in C code after a clean
    stop (docs/RELIABILITY.md, "Stopping: one deadline")."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
