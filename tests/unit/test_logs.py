"""Log lines: JSON (DOCLLM_LOG_FORMAT=json) and text, the level setting, the attempt duration, and
no secret in anything a starting worker logs or serves."""

from __future__ import annotations

import io
import json
import logging
import re
import urllib.request
from collections.abc import Iterator

import pytest
from dependency_injector import providers

from docllm.adapters.telemetry.log_events import LoggingEvents
from docllm.adapters.telemetry.metrics import AttemptTimer
from docllm.domain import events as ev
from docllm.domain.events import RecordingEvents
from docllm.entrypoints.bootstrap import build_container, build_service
from docllm.logs import setup_logging
from docllm.settings import Settings
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

SECRET = "sk-live-0123456789abcdef-secret"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Logging set up by the code under test writes here; the root logger is restored afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield io.StringIO()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_the_event_fields(stream):
    setup_logging("json", "INFO", stream)
    LoggingEvents("host-1:42").emit(ev.SUCCEEDED, task_id=7, attempt=2, duration=1.25)
    (line,) = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["level"] == "info" and record["logger"] == "docllm.events" and record["message"] == "succeeded"
    assert {k: record[k] for k in ("event", "task_id", "attempt", "worker", "duration")} == {
        "event": "succeeded",
        "task_id": 7,
        "attempt": 2,
        "worker": "host-1:42",
        "duration": 1.25,
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", record["ts"])


def test_json_lines_keep_exceptions_on_the_line(stream):
    setup_logging("json", "INFO", stream)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("docllm.worker").exception("slot failed")
    (line,) = stream.getvalue().splitlines()
    assert "ValueError: boom" in json.loads(line)["exc"]


def test_text_lines_for_people(stream):
    setup_logging("text", "INFO", stream)
    LoggingEvents("w1").emit(ev.RETRIED, task_id=3, attempt=1, error="TransientError: 503", delay_s=2.0, duration=0.4)
    (line,) = stream.getvalue().splitlines()
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO +docllm\.events: retried ", line)
    assert line.endswith(
        "event=retried task_id=3 attempt=1 error=TransientError: 503 delay_s=2.0 duration=0.4 worker=w1"
    )


def test_the_level_setting_filters(stream):
    setup_logging("text", "WARNING", stream)
    events = LoggingEvents("w1")
    events.emit(ev.SUCCEEDED, task_id=1, attempt=1)  # INFO
    events.emit(ev.DEAD_LETTERED, task_id=2, reason="unknown task")  # WARNING
    assert [line.split()[2] for line in stream.getvalue().splitlines()] == ["WARNING"]
    setup_logging("text", "DEBUG", stream)
    events.emit(ev.LEASE_RENEWED, task_id=1, attempt=1)  # heartbeats: DEBUG only
    assert "lease_renewed" in stream.getvalue()


def test_the_end_of_an_attempt_carries_its_duration():
    seen = RecordingEvents()
    timer = AttemptTimer(seen)
    timer.emit(ev.STARTED, task_id=5, attempt=1, worker="w")
    timer.emit(ev.LEASE_RENEWED, task_id=5, attempt=1)
    timer.emit(ev.SUCCEEDED, task_id=5, attempt=1, worker="w")
    timer.emit(ev.SUCCEEDED, task_id=6, attempt=1, worker="w")  # started elsewhere: no duration
    assert seen.names() == ["started", "lease_renewed", "succeeded", "succeeded"]
    assert "duration" not in seen.events[1][1]
    assert 0 <= seen.events[2][1]["duration"] < 5
    assert "duration" not in seen.events[3][1]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_no_secret_in_what_a_starting_worker_logs_or_serves(stream, fmt):
    settings = Settings.from_env(
        {
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_API_KEY": SECRET,
            "DOCLLM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "DOCLLM_DATABASE_URL": "sqlite://",
            "DOCLLM_REDIS_URL": "redis://:redispass@127.0.0.1:9/0",
            "DOCLLM_METRICS_PORT": "0",
            "DOCLLM_METRICS_HOST": "127.0.0.1",
            "DOCLLM_LOG_FORMAT": fmt,
            "DOCLLM_LOG_LEVEL": "DEBUG",
            "DOCLLM_CONCURRENCY": "1",
            "DOCLLM_SHUTDOWN_GRACE_SECONDS": "0",
        }
    )
    setup_logging(settings.log_format, settings.log_level, stream)
    c = build_container(settings, log=False)
    clock = ManualClock()
    c.clock.override(providers.Object(clock))
    c.queue.override(providers.Object(InMemoryTaskQueue(clock)))
    c.repository.override(providers.Object(InMemoryTaskRepository(clock)))
    c.readiness.override(providers.Object({"redis": lambda: True, "database": lambda: True}))
    service = build_service(c).start()
    try:
        port = service.endpoints.port
        pages = [
            urllib.request.urlopen(f"http://127.0.0.1:{port}{p}", timeout=5).read().decode()
            for p in ("/metrics", "/healthz", "/readyz")
        ]
    finally:
        service.request_stop()
        service.wait()
    logged = stream.getvalue()
    assert f"metrics listening on 127.0.0.1:{port}" in logged and "provider=openai" in logged
    for text in [logged, *pages]:
        assert SECRET not in text and "redispass" not in text
    assert SECRET not in repr(settings)
    if fmt == "json":
        assert all(json.loads(line) for line in logged.splitlines())
