"""Domain events as log lines: one line per task event, with task_id, attempt and worker."""

from __future__ import annotations

import logging
from typing import Any

from docllm.domain import events as ev
from docllm.logs import log_fields

_QUIET = {ev.LEASE_RENEWED, ev.CLAIMED, ev.BREAKER_SEEN, ev.BUDGET_SEEN}  # per-heartbeat noise: debug only
_LOUD = {
    ev.FAILED,
    ev.DEAD_LETTERED,
    ev.LEASE_LOST,
    ev.STALE,
    ev.RECONCILED,
    ev.RECLAIMED,
    ev.LEFTOVER_RELEASED,
    ev.BREAKER,
}


class LoggingEvents:
    def __init__(self, worker_id: str, logger: logging.Logger | None = None):
        self.worker_id = worker_id
        self.logger = logger or logging.getLogger("docllm.events")

    def emit(self, event: str, **fields: Any) -> None:
        level = logging.DEBUG if event in _QUIET else logging.WARNING if event in _LOUD else logging.INFO
        if not self.logger.isEnabledFor(level):
            return
        fields.setdefault("worker", self.worker_id)
        log_fields(self.logger, level, event, event=event, **fields)
