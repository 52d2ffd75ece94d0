"""What every program does first: settings, logging, the container, the schema on SQLite."""

from __future__ import annotations

import logging
import sys

from dependency_injector import providers

from docllm.container import Container
from docllm.logs import setup_logging
from docllm.runtime.service import Parts, Service
from docllm.settings import Settings, SettingsError


def load_settings() -> Settings:
    """Settings from the environment; a bad one ends the program with a message naming it."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        print(f"docllm: bad setting: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def build_container(settings: Settings, log: bool = True) -> Container:
    if log:
        setup_logging(settings.log_format, settings.log_level)
        for warning in settings.warnings():
            logging.getLogger("docllm.settings").warning("%s", warning)
    container = Container()
    container.settings.override(providers.Object(settings))
    return container


def prepare_schema(container: Container) -> None:
    """The embedded SQLite database creates itself; MySQL is upgraded by ``docllm init-db``, and
    until then every program stops with a message saying so."""
    from docllm.adapters.sql.migrations import require_schema, upgrade_schema

    if container.settings().database_url.startswith("sqlite"):
        upgrade_schema(container.engine())
    else:
        require_schema(container.engine())


def build_parts(
    container: Container, workers: bool = True, reaper: bool = True, reconciler: bool | None = None
) -> Parts:
    """What the process runs, from the container: the worker's processor and reviewer, the loops'
    reaper and reconciler (``reconciler`` defaults to ``reaper``), metrics and readiness checks
    when the HTTP port is on."""
    metrics = container.metrics()
    batching = workers and container.settings().batch_deployment is not None  # the batch lane (issue 28)
    return Parts(
        queue=container.queue(),
        processor=container.processor() if workers else None,
        reviewer=container.reviewer() if workers else None,
        breaker=container.breaker() if workers else None,
        # The fleet's spend cap gates every worker's claims (I14): counted where calls are priced
        # (DOCLLM_LLM_PRICES, or a deployment's own prices); an unpriced deployment stops claims
        # while a cap is in force (set in Redis: a cap in the settings refuses it at start).
        budget=container.spend_budget() if workers else None,
        reaper=container.reaper() if reaper else None,
        reconciler=container.reconciler() if (reaper if reconciler is None else reconciler) else None,
        metrics=metrics,
        readiness=container.readiness() if metrics is not None else {},
        web_app=_dashboard(container) if container.settings().dashboard_on_worker else None,
        registry=container.worker_registry() if workers else None,
        lanes=container.repository() if metrics is not None else None,
        batcher=container.batcher() if batching else None,
        poller=container.batch_poller() if batching else None,
        batches=container.batch_store() if metrics is not None else None,
    )


def build_service(container: Container, workers: bool = True, reaper: bool = True, http: bool = True) -> Service:
    """``http=False``: a child of ``docllm worker --processes`` (its parent serves the port)."""
    return Service(container.settings(), build_parts(container, workers, reaper), http=http)


def _dashboard(container: Container) -> object:
    from docllm.entrypoints.dashboard.wiring import build_app

    return build_app(container)
