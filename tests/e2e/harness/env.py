"""The environment every docllm process of the end-to-end tests gets, and how to start the CLI."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Short enough that a crash is recovered in seconds, long enough for a loaded 2-core machine.
FAST_SETTINGS = {
    "DOCLLM_LEASE_SECONDS": "3",
    "DOCLLM_REAPER_INTERVAL_SECONDS": "0.5",
    "DOCLLM_RECONCILE_INTERVAL_SECONDS": "1",
    "DOCLLM_RECONCILE_GRACE_SECONDS": "3",
    "DOCLLM_RETRY_BASE_SECONDS": "0.2",
    "DOCLLM_RETRY_MAX_SECONDS": "2",
    "DOCLLM_SHUTDOWN_GRACE_SECONDS": "2",
    "DOCLLM_MAX_ATTEMPTS": "5",
    "DOCLLM_CONCURRENCY": "2",
    "DOCLLM_LLM_PROVIDER": "offline",
    "DOCLLM_LLM_TIMEOUT_SECONDS": "10",
    "DOCLLM_BREAKER_OPEN_SECONDS": "3",
    "DOCLLM_LOG_FORMAT": "json",
    "DOCLLM_LOG_LEVEL": "INFO",
}


def product_env(redis_url: str, database_url: str, prefix: str, home: Path, **settings: str) -> dict[str, str]:
    """The caller's environment minus its docllm settings, plus the servers and FAST_SETTINGS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCLLM_", "FAKETIME")) and k != "OPENAI_API_KEY"}
    env.pop("LD_PRELOAD", None)
    env.update(FAST_SETTINGS)
    env.update(
        DOCLLM_REDIS_URL=redis_url,
        DOCLLM_DATABASE_URL=database_url,
        DOCLLM_QUEUE_PREFIX=prefix,
        DOCLLM_HOME=str(home),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    )
    env.update(settings)
    return env


def docllm_argv() -> list[str]:
    """The ``docllm`` console script of this Python's environment, else ``python -m`` (never another
    environment's ``docllm`` found on PATH)."""
    script = Path(sys.executable).with_name("docllm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "docllm.entrypoints.cli"]
