"""A worker process in the registry: it beats its record (with what it runs) while it lives and
removes it at a clean stop; a process that stops beating disappears with its TTL."""

from __future__ import annotations

import time

import pytest

from docllm.adapters.memory_registry import InMemoryWorkerRegistry
from docllm.domain.model import TaskStatus
from docllm.runtime.presence import TTL_PERIODS, beat_seconds
from docllm.runtime.service import Parts, Service
from docllm.settings import Settings
from tests.unit.test_worker import FakeReviewer, Rig


def until(predicate, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_beat_period_and_ttl_follow_the_lease():
    assert beat_seconds(30.0) == 5.0 and beat_seconds(0.6) == pytest.approx(0.2)
    assert TTL_PERIODS == 3


def test_a_worker_process_beats_its_record_and_removes_it_at_a_clean_stop():
    rig = Rig(FakeReviewer(30.0), lease=0.6, concurrency=3)
    registry = InMemoryWorkerRegistry(rig.clock)
    settings = Settings(lease_seconds=0.6, concurrency=3, worker_id="host-x:42", shutdown_grace_seconds=0.0)
    parts = Parts(queue=rig.queue, processor=rig.proc, reviewer=rig.reviewer, breaker=rig.breaker, registry=registry)
    service = Service(settings, parts).start()
    try:
        until(lambda: len(registry.live()) == 1)
        [tid] = rig.submit()
        until(lambda: rig.repo.get(tid).status is TaskStatus.processing)
        until(lambda: registry.live()[0].in_flight and registry.live()[0].in_flight[0].age_s > 0.2)
        record = registry.live()[0]
        assert (record.id, record.slots, record.pid > 0) == ("host-x:42", 3, True)
        [flight] = record.in_flight
        assert (flight.task_id, flight.attempt) == (tid, 1)
        assert record.started_at < record.last_beat <= rig.clock.now_ms() / 1000
    finally:
        assert service.wait(10)
    assert registry.live() == []


def test_a_process_that_stops_beating_disappears_after_its_ttl():
    rig = Rig(FakeReviewer(0.0), lease=0.3)
    registry = InMemoryWorkerRegistry(rig.clock)
    settings = Settings(lease_seconds=0.3, worker_id="killed:1", shutdown_grace_seconds=0.0)
    parts = Parts(queue=rig.queue, processor=rig.proc, reviewer=rig.reviewer, breaker=rig.breaker, registry=registry)
    service = Service(settings, parts)
    service.start()
    until(lambda: len(registry.live()) == 1)
    registry.remove = lambda worker_id: None  # a SIGKILL: nothing is removed on the way out
    assert service.wait(10)
    assert len(registry.live()) == 1
    until(lambda: registry.live() == [], timeout=beat_seconds(0.3) * TTL_PERIODS + 1.0)
