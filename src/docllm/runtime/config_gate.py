"""Stops claiming while the LLM configuration is wrong (401/403, unknown model).

Burning every task's attempts on a bad key would fail the whole backlog; instead the worker
stops claiming, says so once, and re-checks with backoff until the configuration works.
"""

from __future__ import annotations

import logging
import threading
import time

from docllm.domain.errors import ConfigurationError
from docllm.domain.ports import DocumentReviewer


class ConfigGate:
    def __init__(self, reviewer: DocumentReviewer, logger: logging.Logger, base: float = 1.0, cap: float = 60.0):
        self.reviewer, self.logger, self.base, self.cap = reviewer, logger, base, cap
        self._lock = threading.Lock()
        self._error: ConfigurationError | None = None
        self._delay = base
        self._next_check = 0.0

    @property
    def open(self) -> bool:
        return self._error is None

    def trip(self, error: ConfigurationError) -> None:
        with self._lock:
            if self._error is None:
                self.logger.error("LLM configuration error, stopped claiming tasks: %s", error)
                self._delay = self.base
                self._next_check = time.monotonic() + self._delay
            self._error = error

    def wait_open(self, stop: threading.Event) -> bool:
        """True when claiming may go on; otherwise waits a little and re-checks (one thread at a time)."""
        if self._error is None:
            return True
        with self._lock:
            pause = self._next_check - time.monotonic()
        if pause > 0:
            stop.wait(min(pause, 1.0))
            return False
        if not self._lock.acquire(blocking=False):
            stop.wait(0.2)
            return False
        try:
            self.reviewer.check()
        except Exception as exc:  # still wrong (or unreachable): wait longer
            self._delay = min(self.cap, self._delay * 2)
            self._next_check = time.monotonic() + self._delay
            self.logger.debug("LLM configuration still failing: %s", exc)
            return False
        else:
            self.logger.warning("LLM configuration works again, claiming resumed")
            self._error = None
            return True
        finally:
            self._lock.release()
