"""Tracing (docs/DEPLOY.md, Tracing): the payload's traceparent, and one task's spans in one trace,
recorded by the real OpenTelemetry SDK's InMemorySpanExporter over the in-memory adapters."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from docllm.adapters.telemetry.tracing import OtelTracer
from docllm.adapters.telemetry.tracing_setup import tracing_on
from docllm.domain.errors import ConfigurationError
from docllm.domain.review.rubric import Rubric
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, Task, TaskStatus
from docllm.domain.tasks.payload import make_payload, parse_payload
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from docllm.domain.tracing import NULL_SPAN, NullTracer, Tracer, traced, valid_traceparent
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
LEASE = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)


# -- the payload --------------------------------------------------------------------------------
def test_a_payload_carries_its_traceparent_and_round_trips() -> None:
    raw = make_payload(7, "a.md", traceparent=TP)
    assert json.loads(raw) == {"task_id": 7, "task_name": "a.md", "traceparent": TP}
    assert parse_payload(raw, 4096).traceparent == TP


def test_without_a_traceparent_the_payload_is_the_original_notes() -> None:
    assert make_payload(7, "a.md") == '{"task_id": 7, "task_name": "a.md"}'
    assert parse_payload('{"task_id": 7, "task_name": "a.md"}', 4096).traceparent is None


@pytest.mark.parametrize(
    "value",
    [
        '"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"',  # no flags
        '"00-00000000000000000000000000000000-b7ad6b7169203331-01"',  # zero trace id
        '"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"',  # upper case
        '"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"',
        "12",
        "null",
        '{"a": 1}',
        '"' + "x" * 500 + '"',
    ],
)
def test_a_malformed_traceparent_is_ignored_not_fatal(value: str) -> None:
    ref = parse_payload('{"task_id": 7, "traceparent": ' + value + "}", 4096)
    assert (ref.task_id, ref.traceparent) == (7, None)


def test_valid_traceparent_is_the_w3c_form() -> None:
    assert valid_traceparent(TP) == TP
    assert valid_traceparent(TP + " ") is None


# -- spans --------------------------------------------------------------------------------------
@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(spans: InMemorySpanExporter) -> OtelTracer:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return OtelTracer(provider)


class World:
    def __init__(self, tracer: Tracer) -> None:
        self.clock = ManualClock()
        self.queue = InMemoryTaskQueue(self.clock)
        self.repo = InMemoryTaskRepository(self.clock)
        self.retry = RetryPolicy(max_attempts=3)
        self.tracer = tracer

    def row(self, task_id: int) -> Task:
        row = self.repo.get(task_id)
        assert row is not None
        return row

    def worker(self, name: str) -> TaskProcessor:
        return TaskProcessor(self.queue, self.repo, Reviewer(), self.clock, self.retry, LEASE, name, tracer=self.tracer)


class Reviewer:
    """Opens a child of the current span, as the LLM adapter does for each call."""

    name = "stub"

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        with traced("chat stub", {"gen_ai.system": "stub"}):
            return {"findings": [], "summary": "ok", "reviewer": "stub"}

    async def check(self) -> None:
        pass


def _begun(proc: TaskProcessor) -> Attempt:
    delivery = proc.claim()
    assert delivery is not None
    attempt = proc.begin(delivery)
    assert attempt is not None
    return attempt


def _by_name(exported: Sequence[ReadableSpan]) -> dict[str, list[dict[str, Any]]]:
    """The spans by name, each as the SDK writes it in JSON (as the e2e test reads them)."""
    named: dict[str, list[dict[str, Any]]] = {}
    for span in exported:
        named.setdefault(span.name, []).append(json.loads(span.to_json()))
    return named


def test_one_trace_from_submit_through_a_lost_lease_a_reap_and_the_commit(
    tracer: OtelTracer, spans: InMemorySpanExporter
) -> None:
    world = World(tracer)
    task = submit(world.repo, world.queue, "doc.md", "# T\n\ntext\n", tracer=tracer)
    assert valid_traceparent(world.row(task.task_id).traceparent)
    first = world.worker("w1")
    attempt = _begun(first)
    asyncio.run(first.review(attempt))
    first.lease_lost(attempt)  # the heartbeat found the lease gone; the reaper took it meanwhile
    world.clock.advance(LEASE.lease_ms + 1)
    Reaper(world.queue, world.repo, world.retry, tracer=tracer).reap_once()
    assert first.hand_back(attempt) is False  # the reaper's reclaim came first
    second = world.worker("w2")
    again = _begun(second)
    assert second.finish(again, asyncio.run(second.review(again)))
    assert world.row(task.task_id).status is TaskStatus.success

    named = _by_name(spans.get_finished_spans())
    [submitted] = named["docllm.submit"]
    trace_id = submitted["context"]["trace_id"]
    attempts = sorted(named["docllm.attempt"], key=lambda s: s["attributes"]["docllm.attempt"])
    assert [s["attributes"]["docllm.attempt"] for s in attempts] == [1, 2]
    assert {s["context"]["trace_id"] for s in attempts} == {trace_id}
    assert all(s["parent_id"] == submitted["context"]["span_id"] for s in attempts)
    assert [s["attributes"]["docllm.worker"] for s in attempts] == ["w1", "w2"]
    assert [e["name"] for e in attempts[0]["events"]] == ["docllm.lease_lost"]
    assert (attempts[0]["attributes"]["docllm.verdict"], attempts[0]["attributes"]["docllm.reason"]) == (
        "release",
        "lease_lost",
    )
    assert attempts[0]["attributes"]["docllm.landed"] is False
    assert (attempts[1]["attributes"]["docllm.verdict"], attempts[1]["attributes"]["docllm.landed"]) == (
        "success",
        True,
    )
    chats = named["chat stub"]
    assert sorted(c["parent_id"] for c in chats) == sorted(a["context"]["span_id"] for a in attempts)
    assert {s["context"]["trace_id"] for s in named["docllm.claim"] + named["docllm.finish"]} == {trace_id}
    # The reaper's action is a trace of its own, linked to the task's.
    [reap] = named["docllm.reap"]
    assert reap["context"]["trace_id"] != trace_id
    assert [link["context"]["trace_id"] for link in reap["links"]] == [trace_id]
    assert reap["attributes"]["docllm.action"] == "reclaimed"


def test_the_reconcilers_requeue_continues_the_trace(tracer: OtelTracer, spans: InMemorySpanExporter) -> None:
    world = World(tracer)
    task = submit(world.repo, world.queue, "doc.md", "# T\n\ntext\n", tracer=tracer)
    world.queue.client.flushall()  # Redis lost the payload (D10)
    reconciler = Reconciler(world.queue, world.repo, world.clock, grace_ms=1000, tracer=tracer)
    for _ in range(4):
        reconciler.reconcile_once()
        world.clock.advance(1001)
    assert parse_payload(world.queue.client.lrange("docllm:queue:ready", 0, -1)[0], 4096).traceparent == (
        world.row(task.task_id).traceparent
    )
    proc = world.worker("w1")
    attempt = _begun(proc)
    proc.finish(attempt, asyncio.run(proc.review(attempt)))
    named = _by_name(spans.get_finished_spans())
    trace_id = named["docllm.submit"][0]["context"]["trace_id"]
    assert named["docllm.attempt"][0]["context"]["trace_id"] == trace_id
    assert [link["context"]["trace_id"] for link in named["docllm.reconcile"][0]["links"]] == [trace_id]


def test_off_every_span_is_the_null_one() -> None:
    world = World(NullTracer())
    task = submit(world.repo, world.queue, "doc.md", "# T\n\ntext\n", tracer=world.tracer)
    assert world.row(task.task_id).traceparent is None
    proc = world.worker("w1")
    attempt = _begun(proc)
    assert attempt.span is NULL_SPAN
    assert world.queue.client.lrange("docllm:queue:processing", 0, -1) == [
        make_payload(task.task_id, "doc.md").encode()
    ]


# -- when it is on ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "file", "environ", "on"),
    [
        ("auto", "", {}, False),
        ("auto", "", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ("auto", "", {"OTEL_TRACES_EXPORTER": "console"}, True),
        ("auto", "", {"OTEL_TRACES_EXPORTER": "none"}, False),
        ("auto", "spans.jsonl", {}, True),
        ("auto", "spans.jsonl", {"OTEL_SDK_DISABLED": "true"}, False),
        ("on", "", {}, True),
        ("on", "", {"OTEL_SDK_DISABLED": "TRUE"}, False),
        ("off", "", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_configured(mode: str, file: str, environ: dict, on: bool) -> None:
    assert tracing_on(mode, file, environ) is on


def test_an_unknown_exporter_stops_the_program_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OTEL_TRACES_EXPORTER"):
        tracing_on("auto", "", {"OTEL_TRACES_EXPORTER": "zipkin"})


def test_off_opentelemetry_is_never_imported() -> None:
    code = (
        "import sys, os; from docllm.container import Container; c = Container(); "
        "t = c.tracer(); assert type(t).__name__ == 'NullTracer', t; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "DOCLLM_DATABASE_URL": "sqlite:///x.db"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)  # noqa: S603


def test_the_otlp_exporter_posts_spans_to_the_configured_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` alone turns tracing on, and spans reach that collector over
    HTTP (a loopback server standing in for one), in OTLP's protobuf form."""
    import http.server
    import threading

    from docllm.adapters.telemetry.tracing_setup import make_tracer

    posts: list[tuple[str, str, bytes]] = []
    arrived = threading.Event()

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the handler's name is the HTTP method's)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            posts.append((self.path, self.headers.get("Content-Type", ""), body))
            self.send_response(200)
            self.end_headers()
            arrived.set()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        tracer = make_tracer("auto", "", env)
        assert isinstance(tracer, OtelTracer)
        tracer.start("task", attributes={"docllm.task_id": 7}).end()
        assert arrived.wait(30), "no span reached the collector"
    finally:
        server.shutdown()
    path, content_type, body = posts[0]
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    assert b"docllm.task_id" in body and b"docllm" in body
