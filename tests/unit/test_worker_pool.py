"""The threaded runtime: concurrency, heartbeats, lost leases, maximum runtime, shutdown, bad LLM config."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from docllm.adapters.memory_queue import InMemoryTaskQueue
from docllm.adapters.memory_repository import InMemoryTaskRepository
from docllm.domain import events as ev
from docllm.domain.errors import ConfigurationError
from docllm.domain.events import RecordingEvents
from docllm.domain.model import TaskStatus
from docllm.domain.policies import LeasePolicy, RetryPolicy
from docllm.domain.services.attempts import TaskProcessor
from docllm.domain.services.producer import submit
from docllm.domain.services.reaper import Reaper
from docllm.runtime.config_gate import ConfigGate
from docllm.runtime.worker_pool import WorkerPool


class RealClock:
    def now_ms(self) -> int:
        return int(time.monotonic() * 1000)


class SlowReviewer:
    name = "slow"

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.running = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.broken = False  # ConfigurationError while True

    def review(self, task_name, document):
        if self.broken:
            raise ConfigurationError("401 Unauthorized: check DOCLLM_LLM_API_KEY")
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        return {"findings": [], "summary": "ok"}

    def check(self):
        if self.broken:
            raise ConfigurationError("still 401")


class Rig:
    def __init__(self, reviewer, lease=0.3, max_runtime=30.0, concurrency=2):
        self.clock = RealClock()
        self.queue = InMemoryTaskQueue(self.clock)
        self.repo = InMemoryTaskRepository()
        self.events = RecordingEvents()
        self.reviewer = reviewer
        self.lease = LeasePolicy(lease_seconds=lease, max_runtime_seconds=max_runtime, reaper_interval_seconds=0.05)
        self.retry = RetryPolicy(max_attempts=3, base_seconds=0.05, cap_seconds=0.1)
        gate = ConfigGate(reviewer, logging.getLogger("test"), base=0.05, cap=0.1)
        self.pool = WorkerPool(self.processor, self.queue, gate, concurrency, idle_wait_seconds=0.05)
        self.gate = gate

    def processor(self):
        return TaskProcessor(self.queue, self.repo, self.reviewer, self.clock, self.retry, self.lease, "w",
                             events=self.events)

    def submit(self, n=1):
        return [submit(self.repo, self.queue, f"d{i}.md", "# T\n\nx\n").task_id for i in range(n)]

    def wait_for(self, predicate, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(0.02)
        raise AssertionError("condition not reached in time")

    def statuses(self, ids):
        return [self.repo.get(i).status for i in ids]


@pytest.fixture
def rigs():
    made = []

    def make(*args, **kwargs):
        rig = Rig(*args, **kwargs)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.pool.stop(0)
        rig.pool.join(5)


def test_runs_concurrency_attempts_at_once_and_finishes_them_all(rigs):
    rig = rigs(SlowReviewer(0.1), concurrency=4)
    ids = rig.submit(12)
    rig.pool.start()
    rig.wait_for(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))
    assert rig.reviewer.peak == 4


def test_heartbeats_keep_a_review_longer_than_the_lease(rigs):
    rig = rigs(SlowReviewer(1.0), lease=0.3)
    [tid] = rig.submit()
    reaper = Reaper(rig.queue, rig.repo, rig.retry, events=rig.events)
    rig.pool.start()
    end = time.monotonic() + 10
    while rig.repo.get(tid).status is not TaskStatus.success and time.monotonic() < end:
        reaper.reap_once()  # a busy reaper beside it must never reclaim a heartbeating attempt
        time.sleep(0.02)
    assert rig.repo.get(tid).attempt == 1
    assert ev.LEASE_RENEWED in rig.events.names() and ev.RECLAIMED not in rig.events.names()


def test_a_lost_lease_stops_the_attempt_and_commits_nothing(rigs):
    rig = rigs(SlowReviewer(1.0), lease=0.3)
    [tid] = rig.submit()
    rig.pool.start()
    rig.wait_for(lambda: rig.queue.in_flight(1))
    rig.queue.ack(rig.queue.in_flight(1)[0].token)  # the lease is taken away (as by a reaper)
    rig.wait_for(lambda: ev.LEASE_LOST in rig.events.names())
    time.sleep(1.2)  # the review ends; nothing may be written
    assert rig.repo.get(tid).status is TaskStatus.processing
    assert ev.SUCCEEDED not in rig.events.names()


def test_an_attempt_past_the_maximum_runtime_is_abandoned_and_retried(rigs):
    rig = rigs(SlowReviewer(2.0), lease=0.3, max_runtime=0.3)
    [tid] = rig.submit()
    rig.pool.start()
    rig.wait_for(lambda: rig.repo.get(tid).retry_count >= 1)
    assert "PROCESSING_TIMEOUT_SECONDS" in rig.repo.get(tid).error


def test_shutdown_releases_unfinished_attempts_to_ready_at_the_grace_deadline(rigs):
    rig = rigs(SlowReviewer(5.0), lease=0.3)
    [tid] = rig.submit()
    rig.pool.start()
    rig.wait_for(lambda: rig.repo.get(tid).status is TaskStatus.processing)
    started = time.monotonic()
    rig.pool.stop(grace_seconds=0.3)
    assert rig.pool.join(5.0)
    assert time.monotonic() - started < 2.0
    row = rig.repo.get(tid)
    assert row.status is TaskStatus.pending and row.retry_count == 0
    assert rig.queue.stats().ready == 1 and rig.queue.stats().processing == 0


def test_shutdown_lets_a_short_attempt_finish_within_the_grace_period(rigs):
    rig = rigs(SlowReviewer(0.3), lease=0.3)
    [tid] = rig.submit()
    rig.pool.start()
    rig.wait_for(lambda: rig.repo.get(tid).status is TaskStatus.processing)
    rig.pool.stop(grace_seconds=5.0)
    assert rig.pool.join(6.0)
    assert rig.repo.get(tid).status is TaskStatus.success


def test_a_configuration_error_stops_claiming_without_failing_tasks(rigs):
    rig = rigs(SlowReviewer(0.0), concurrency=2)
    rig.reviewer.broken = True
    ids = rig.submit(3)
    rig.pool.start()
    rig.wait_for(lambda: not rig.gate.open)
    time.sleep(0.5)
    rows = [rig.repo.get(i) for i in ids]
    assert all(r.status is TaskStatus.pending and r.retry_count == 0 for r in rows)
    assert rig.events.names().count(ev.STARTED) <= 2  # stopped claiming after the first errors
    rig.reviewer.broken = False  # the operator fixes the key
    rig.wait_for(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))
