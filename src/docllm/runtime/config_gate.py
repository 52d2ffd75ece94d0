"""Stops claiming while the LLM configuration is wrong (401/403, unknown model).

Burning every task's attempts on a bad key would fail the whole backlog; instead the worker
stops claiming, says so once, and re-checks with backoff until the configuration works.
"""

from __future__ import annotations

import logging

from docllm.domain.backoff import Backoff
from docllm.domain.errors import ConfigurationError
from docllm.domain.ports import DocumentReviewer


class ConfigGate:
    def __init__(self, reviewer: DocumentReviewer, logger: logging.Logger, base: float = 1.0, cap: float = 60.0):
        self.reviewer, self.logger = reviewer, logger
        self.backoff = Backoff(base, cap)
        self._error: ConfigurationError | None = None

    @property
    def open(self) -> bool:
        return self._error is None

    def trip(self, error: ConfigurationError) -> None:
        if self._error is None:
            self.logger.error("LLM configuration error, stopped claiming tasks: %s", error)
            self.backoff.reset()
        self._error = error

    def pause(self) -> float:
        """How long to wait before the next check of a wrong configuration."""
        return self.backoff.next()

    async def recheck(self) -> bool:
        """Probe the configuration once; True (and claiming resumes) when it works again."""
        try:
            await self.reviewer.check()
        except Exception as exc:  # noqa: BLE001 - still wrong (or unreachable): wait longer
            self.logger.debug("LLM configuration still failing: %s", exc)
            return False
        self.logger.warning("LLM configuration works again, claiming resumed")
        self._error = None
        return True
