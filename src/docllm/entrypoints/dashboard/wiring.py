"""The dashboard built from the container: the same adapters and services as the CLI."""

from __future__ import annotations

from flask import Flask

from docllm.container import Container
from docllm.entrypoints.dashboard.app import Sources, create_app
from docllm.entrypoints.dashboard.security import Access
from docllm.entrypoints.snapshot import stats_of


def build_app(c: Container) -> Flask:
    # A container built without a worker registry provider (an overridden or reduced one, as in
    # tests) shows "no worker registry" rather than failing.
    registry = c.worker_registry() if hasattr(c, "worker_registry") else None
    sessions = c.dashboard_sessions() if hasattr(c, "dashboard_sessions") else None
    sources = Sources(
        c.repository(),
        c.queue(),
        lambda: stats_of(c),
        registry,
        c.events(),
        batches=c.batch_store(),
        sessions=sessions,
        marks=c.marks(),
    )
    s = c.settings()
    access = Access(s.dashboard_token, s.dashboard_session_seconds, s.dashboard_https, s.dashboard_trusted_proxies)
    return create_app(sources, access=access)
