"""Logging set-up: text lines for people, JSON lines (DOCLLM_LOG_FORMAT=json) for machines."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

FIELDS_ATTR = "docllm_fields"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, FIELDS_ATTR, {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, FIELDS_ATTR, {})
        if fields:
            text += " " + " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        return text


def setup_logging(fmt: str = "text", level: str = "INFO", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Client libraries log every HTTP request at INFO; keep them to warnings.
    for noisy in ("httpx", "httpx2", "openai", "httpcore", "alembic"):  # httpx2: openai 3.x
        logging.getLogger(noisy).setLevel(logging.WARNING)


def log_fields(logger: logging.Logger, level: int, message: str, **fields) -> None:
    logger.log(level, message, extra={FIELDS_ATTR: fields})
