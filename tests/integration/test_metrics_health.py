"""Metrics and health endpoints: in-process on the in-memory adapters (loops that die or stall,
readiness that fails), then a real worker process on real Redis and MariaDB (counts that move,
/readyz following a Redis and a database outage)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from dependency_injector import providers
from prometheus_client.parser import text_string_to_metric_families

from docllm.adapters.telemetry.lane_metrics import EVERY_S
from docllm.adapters.telemetry.metrics import Metrics, PrometheusEvents, reason_label
from docllm.container import Container
from docllm.domain import events as ev
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.outcome import Reason
from docllm.domain.tasks.producer import submit
from docllm.entrypoints.bootstrap import build_service
from docllm.runtime.service import Service
from docllm.settings import Settings
from sim.fault_injection import Crash
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-must-never-be-logged-1234"
T = TypeVar("T")

# -- helpers -----------------------------------------------------------------------------------


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


Samples = dict[tuple[str, frozenset], float]


def scrape(port: int) -> tuple[set[str], Samples]:
    """Family names (as in ``# TYPE``) and every sample by (name, labels)."""
    status, text = get(port, "/metrics")
    assert status == 200
    names, samples = set(), {}
    for family in text_string_to_metric_families(text):
        names.add(family.name + ("_total" if family.type == "counter" else ""))
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return names, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def eventually(check: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    end = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


# -- in-process: the in-memory adapters -----------------------------------------------------------


@pytest.fixture
def make_service() -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def make(workers: bool = True, reaper: bool = True, queue=None, ready=None, **overrides) -> Service:
        values = dict(
            database_url="sqlite://",
            metrics_port=0,
            metrics_host="127.0.0.1",
            worker_id="t1",
            concurrency=1,
            reaper_interval_seconds=0.05,
            shutdown_grace_seconds=1.0,
        )
        settings = Settings(**{**values, **overrides})
        clock = ManualClock()
        c = Container()
        c.settings.override(providers.Object(settings))
        c.clock.override(providers.Object(clock))
        c.queue.override(providers.Object(queue or InMemoryTaskQueue(clock)))
        c.repository.override(providers.Object(InMemoryTaskRepository(clock)))
        c.readiness.override(providers.Object(ready or {"redis": lambda: True, "database": lambda: True}))
        service = build_service(c, workers=workers, reaper=reaper).start()
        service.container = c  # type: ignore[attr-defined]  # the tests reach the ports through it
        started.append(service)
        return service

    yield make
    for service in started:
        service.request_stop()
        service.wait()


def _health(service: Service) -> tuple[int, dict]:
    assert service.endpoints is not None
    status, body = get(service.endpoints.port, "/healthz")
    return status, json.loads(body)


# A thread that dies of an uncaught exception is what these tests are about.
died_on_purpose = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


@died_on_purpose
def test_healthz_fails_when_the_reaper_loop_dies(make_service):
    service = make_service(workers=False)
    assert _health(service) == (200, {"status": "ok", "problems": []})
    reaper = next(loop for loop in service.loops if loop.name == "reaper")

    def die() -> bool:
        raise Crash("reaper step")  # a BaseException: the loop does not catch it, its task ends

    reaper.step = die
    eventually(lambda: service.tasks["reaper"].done(), 5, "the reaper loop to end")
    status, body = _health(service)
    assert status == 503 and body["problems"] == ["reaper loop stalled"]


def test_healthz_fails_while_a_loop_is_stuck_and_recovers(make_service):
    service = make_service(workers=False)
    reaper = next(loop for loop in service.loops if loop.name == "reaper")
    release, entered = threading.Event(), threading.Event()
    real_step = reaper.step

    def hang() -> bool:  # a step blocked forever (a hung connection, a deadlock)
        entered.set()
        release.wait()
        reaper.step = real_step
        return False

    reaper.step = hang
    assert entered.wait(5)
    reaper.last_beat -= 3600  # as if it had hung for an hour
    status, body = _health(service)
    assert status == 503 and body["problems"] == ["reaper loop stalled"]
    release.set()
    eventually(lambda: _health(service)[0] == 200, 5, "/healthz back to 200")


@died_on_purpose
class ClaimsCrash(InMemoryTaskQueue):
    """The next claim the dispatcher makes, once armed, dies (other tasks of the process also call
    the queue: the presence beat, the cancel marks)."""

    armed = False

    def _crash(self) -> None:
        if self.armed:
            raise Crash("claim")

    def claim_batch(self, worker_id, lease_ms, limit):
        self._crash()
        return super().claim_batch(worker_id, lease_ms, limit)

    def stage(self, timeout_s):
        self._crash()
        return super().stage(timeout_s)


def test_healthz_fails_when_the_worker_dispatcher_dies(make_service):
    queue = ClaimsCrash(ManualClock())
    service = make_service(reaper=False, concurrency=2, queue=queue)
    assert _health(service)[0] == 200
    queue.armed = True  # the dispatcher's next claim kills it
    eventually(lambda: _health(service)[0] == 503, 10, "/healthz to fail")
    status, body = _health(service)
    assert body["problems"] == ["worker dispatcher died"]


def test_healthz_stays_ok_while_draining(make_service):
    service = make_service(offline_latency_seconds=10.0, shutdown_grace_seconds=3.0)
    c = service.container
    submit(c.repository(), c.queue(), "doc", "# Title\n\nA short document.\n")
    eventually(lambda: service.worker is not None and service.worker.in_flight == 1, 5, "an attempt in flight")
    service.request_stop()
    eventually(lambda: all(service.tasks[loop.name].done() for loop in service.loops), 5, "loops to end")
    assert not service.tasks["worker"].done()  # still draining its attempt
    assert _health(service)[0] == 200


def test_readyz_names_what_failed_without_credentials(make_service):
    def database() -> None:
        raise ConnectionError("cannot connect to mysql+pymysql://docllm:hunter2@db/docllm")

    service = make_service(ready={"redis": lambda: True, "database": database})
    status, text = get(service.endpoints.port, "/readyz")
    body = json.loads(text)
    assert status == 503 and body["status"] == "not ready: database"
    assert body["checks"]["redis"] == "ok" and body["checks"]["database"].startswith("ConnectionError: ")
    assert "hunter2" not in text
    assert get(service.endpoints.port, "/nothing")[0] == 404


def test_counts_move_in_process(make_service):
    service = make_service(concurrency=2)
    c = service.container
    repo, queue = c.repository(), c.queue()
    port = service.endpoints.port
    names, before = scrape(port)
    assert {
        "docllm_tasks_claimed_total",
        "docllm_tasks_succeeded_total",
        "docllm_queue_depth",
        "docllm_attempts_in_flight",
        "docllm_llm_review_seconds",
    } <= names
    ids = [submit(repo, queue, f"doc{i}", "# Title\n\nA short document.\n").task_id for i in range(3)]
    queue.push("not a payload")
    eventually(lambda: all(t.status is TaskStatus.success for t in repo.get_many(ids)), 10, "tasks to succeed")
    eventually(lambda: queue.stats().dead == 1, 10, "the malformed payload to be dead-lettered")
    # A row reads success once its commit lands; the counter moves after the ack that follows it.
    succeeded = lambda: value(scrape(port)[1], "docllm_tasks_succeeded_total")  # noqa: E731
    eventually(lambda: succeeded() - value(before, "docllm_tasks_succeeded_total") == 3, 10, "3 counted")
    _, after = scrape(port)
    assert value(after, "docllm_tasks_succeeded_total") - value(before, "docllm_tasks_succeeded_total") == 3
    assert value(after, "docllm_tasks_claimed_total") == 4
    assert value(after, "docllm_tasks_dead_lettered_total", reason="malformed_payload") == 1
    assert value(after, "docllm_llm_review_seconds_count", provider="offline", outcome="ok") == 3
    assert value(after, "docllm_attempt_duration_seconds_count", outcome="succeeded") == 3
    assert value(after, "docllm_queue_depth", queue="dead") == 1
    assert value(after, "docllm_reaper_cycle_seconds_count") > 0


def test_reason_labels_come_from_the_enum_never_from_a_message():
    assert reason_label(Reason.attempts_exhausted) == "attempts_exhausted"
    assert reason_label("attempts exhausted (5/5): TransientError: the LLM answered 503") == "other"
    assert reason_label(None) == "other"


def test_prometheus_events_count_by_name_and_reason():
    m = Metrics()
    sink = PrometheusEvents(m)
    sink.emit(ev.RETRIED, task_id=1, attempt=1, reason=Reason.transient_error, error="TransientError: x", duration=0.5)
    sink.emit(ev.RECLAIMED, task_id=2, attempt=1, reason=Reason.lease_expired)
    sink.emit(ev.REQUEUED, task_id=3, reason=Reason.never_started)
    sink.emit(ev.FAILED, task_id=4, attempt=5, reason=Reason.attempts_exhausted, error="attempts exhausted (5/5): x")
    get_value = m.registry.get_sample_value
    assert get_value("docllm_tasks_retried_total", {"reason": "transient_error"}) == 1
    assert get_value("docllm_tasks_reclaimed_total", {"reason": "lease_expired"}) == 1
    assert get_value("docllm_tasks_reclaimed_total", {"reason": "never_started"}) == 1
    assert get_value("docllm_tasks_failed_total", {"reason": "attempts_exhausted"}) == 1
    assert get_value("docllm_events_total", {"event": "requeued"}) == 1
    assert get_value("docllm_attempt_duration_seconds_sum", {"outcome": "retried"}) == 0.5
    assert Metrics().registry.get_sample_value("docllm_events_total", {"event": "requeued"}) is None


# -- a real worker process on real Redis and MariaDB ------------------------------------------------

METRIC_NAMES = {
    "docllm_tasks_claimed_total",
    "docllm_attempts_started_total",
    "docllm_tasks_succeeded_total",
    "docllm_tasks_failed_total",
    "docllm_tasks_retried_total",
    "docllm_tasks_released_total",
    "docllm_tasks_reclaimed_total",
    "docllm_tasks_dead_lettered_total",
    "docllm_lease_renewals_total",
    "docllm_leases_lost_total",
    "docllm_events_total",
    "docllm_backend_errors_total",
    "docllm_llm_errors_total",
    "docllm_llm_review_seconds",
    "docllm_attempt_duration_seconds",
    "docllm_reaper_cycle_seconds",
    "docllm_reconciler_cycle_seconds",
    "docllm_attempts_in_flight",
    "docllm_queue_depth",
    "docllm_scaling_waiting",
    "docllm_oldest_processing_age_seconds",
}
# Read from the task table at scrape time (lane_metrics.py); tenants and waits only once there is work.
LANE_METRIC_NAMES = {
    "docllm_lane_depth",
    "docllm_lane_in_flight",
    "docllm_lane_finished",
    "docllm_lane_oldest_pending_seconds",
}
# Read from the batch record at scrape time (batch_metrics.py): every state a series, zeros included.
BATCH_METRIC_NAMES = {"docllm_llm_batches", "docllm_llm_batch_tasks_unfinished"}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "docllm.entrypoints.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def worker_env(redis_url: str, mysql_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCLLM_") and k != "OPENAI_API_KEY"}
    env.update(
        {
            "DOCLLM_HOME": str(tmp_path / "home"),
            "DOCLLM_REDIS_URL": redis_url,
            "DOCLLM_DATABASE_URL": mysql_url,
            "DOCLLM_METRICS_PORT": "0",
            "DOCLLM_METRICS_HOST": "127.0.0.1",
            "DOCLLM_LLM_PROVIDER": "offline",
            "DOCLLM_LLM_API_KEY": SECRET,  # unused by the offline provider; must not show up in a log line
            # Heartbeats every second and attempts of 3.5 s: each attempt renews its lease two or three
            # times, so at least one each however late a busy machine wakes the heartbeat.
            "DOCLLM_OFFLINE_LATENCY_SECONDS": "3.5",
            "DOCLLM_LEASE_SECONDS": "3",
            "DOCLLM_REAPER_INTERVAL_SECONDS": "0.5",
            "DOCLLM_CONCURRENCY": "2",
            "DOCLLM_LOG_FORMAT": "json",
            "DOCLLM_WORKER_ID": "metrics-test-worker",
            "PYTHONPATH": str(ROOT / "src"),
        }
    )
    _cli(env, "init-db")
    return env


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int, Path]]:
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "docllm.entrypoints.worker"], env=worker_env, stdout=subprocess.DEVNULL, stderr=log
        )
    try:

        def port() -> int | None:
            match = re.search(r"metrics listening on 127\.0\.0\.1:(\d+)", log_path.read_text())
            assert proc.poll() is None, f"worker exited:\n{log_path.read_text()}"
            return int(match.group(1)) if match else None

        yield proc, int(eventually(port, 30, "the metrics port in the log")), log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _submit(env: dict[str, str], tmp_path: Path, n: int) -> list[int]:
    paths = []
    for i in range(n):
        path = tmp_path / f"doc-{time.monotonic_ns()}-{i}.md"
        path.write_text(f"# Document {i}\n\nA short text to review.\n")
        paths.append(str(path))
    return [t["task_id"] for t in json.loads(_cli(env, "submit", "--json", *paths).stdout)]


def test_a_running_worker_serves_metrics_health_and_readiness(
    worker, worker_env, redis_server, mariadb_server, tmp_path
):
    proc, port, log_path = worker
    names, before = scrape(port)
    wanted = METRIC_NAMES | LANE_METRIC_NAMES | BATCH_METRIC_NAMES
    assert names >= wanted, sorted(wanted - names)
    assert value(before, "docllm_tasks_succeeded_total") == 0
    assert get(port, "/healthz")[0] == 200
    status, text = get(port, "/readyz")
    assert status == 200 and json.loads(text)["checks"] == {"redis": "ok", "database": "ok"}

    _submit(worker_env, tmp_path, 3)
    with redis_server.client() as client:
        client.lpush("docllm:queue:ready", "this is not a payload")

    def finished() -> Samples | None:
        _, now = scrape(port)
        # The attempt's duration is observed just after its success event: wait for both.
        done = value(now, "docllm_tasks_succeeded_total") == 3
        done = done and value(now, "docllm_attempt_duration_seconds_count", outcome="succeeded") == 3
        return now if done and value(now, "docllm_tasks_dead_lettered_total", reason="malformed_payload") == 1 else None

    after = eventually(finished, 60, "3 successes and 1 dead letter in /metrics")
    assert value(after, "docllm_tasks_claimed_total") == 4
    assert value(after, "docllm_attempts_started_total") == 3
    assert value(after, "docllm_lease_renewals_total") >= 3
    assert value(after, "docllm_llm_review_seconds_count", provider="offline", outcome="ok") == 3
    assert value(after, "docllm_llm_review_seconds_sum", provider="offline", outcome="ok") >= 10.5
    assert value(after, "docllm_attempt_duration_seconds_count", outcome="succeeded") == 3
    assert value(after, "docllm_reaper_cycle_seconds_count") > value(before, "docllm_reaper_cycle_seconds_count")
    assert value(after, "docllm_queue_depth", queue="ready") == 0
    assert value(after, "docllm_queue_depth", queue="dead") == 1
    assert value(after, "docllm_attempts_in_flight") == 0
    assert value(after, "docllm_backend_errors_total", backend="redis") == 0
    # the lanes' figures are read at most every lane_metrics.EVERY_S: wait for a fresh one
    lanes = eventually(
        lambda: (now := scrape(port)[1]) and value(now, "docllm_lane_finished", lane="default") == 3 and now,
        4 * EVERY_S,
        "3 tasks finished in lane default",
    )
    assert value(lanes, "docllm_lane_wait_seconds", lane="default", quantile="0.95") > 0
    assert value(lanes, "docllm_lane_depth", lane="default") == 0

    # Redis stops: not ready, still alive (a restart would not help), and the errors are counted.
    redis_server.stop()
    try:
        status, text = eventually(lambda: (r := get(port, "/readyz"))[0] == 503 and r, 20, "/readyz 503")
        body = json.loads(text)
        assert body["status"] == "not ready: redis" and body["checks"]["database"] == "ok"
        eventually(
            lambda: value(scrape(port)[1], "docllm_backend_errors_total", backend="redis") > 0,
            20,
            "a counted Redis error",
        )
        assert get(port, "/healthz")[0] == 200
    finally:
        redis_server.start()
    eventually(lambda: get(port, "/readyz")[0] == 200, 30, "/readyz back to 200 after Redis")

    # The database stops: not ready, naming it.
    mariadb_server.stop()
    try:
        status, text = eventually(lambda: (r := get(port, "/readyz"))[0] == 503 and r, 30, "/readyz 503")
        body = json.loads(text)
        assert body["status"] == "not ready: database" and body["checks"]["redis"] == "ok"
    finally:
        mariadb_server.start()
    eventually(lambda: get(port, "/readyz")[0] == 200, 30, "/readyz back to 200 after the database")

    # Work goes on after both outages.
    _submit(worker_env, tmp_path, 1)
    eventually(lambda: value(scrape(port)[1], "docllm_tasks_succeeded_total") == 4, 60, "a 4th success")

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    lines = log_path.read_text().splitlines()
    assert lines and not any(SECRET in line for line in lines)
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    done = [r for r in records if r.get("event") == ev.SUCCEEDED]
    assert len(done) == 4
    for r in done:
        assert {"task_id", "attempt", "worker", "event", "duration"} <= set(r)
        assert r["worker"] == "metrics-test-worker" and r["duration"] >= 3.5
