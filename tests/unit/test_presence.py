"""A worker process in the registry: it beats its record (with what it runs) while it lives and
removes it at a clean stop; a process that stops beating disappears with its TTL. The service runs
on virtual time with inline port calls (``tests.support.runtime_rig``)."""

from __future__ import annotations

import asyncio

import pytest

from docllm.domain.tasks.model import TaskStatus
from docllm.runtime.presence import TTL_PERIODS, beat_seconds
from docllm.runtime.service import Parts, Service
from docllm.settings import Settings
from tests.support.memory.registry import InMemoryWorkerRegistry
from tests.support.runtime_rig import FakeReviewer, Rig


def on_rig(service: Service, rig: Rig) -> Service:
    """The service with the rig's port calls (inline, on virtual time) in place of its threads."""
    service.calls.close()
    service.calls = rig.calls
    return service


async def stopped(service: Service, running: asyncio.Task[None], timeout: float) -> bool:
    """Request a stop and wait for the drain (``Service.wait`` on the loop); True when it ended."""
    service.request_stop()
    done, _ = await asyncio.wait([running], timeout=timeout)
    return bool(done)


def test_beat_period_and_ttl_follow_the_lease():
    assert beat_seconds(30.0) == 5.0 and beat_seconds(0.6) == pytest.approx(0.2)
    assert TTL_PERIODS == 3


def test_a_worker_process_beats_its_record_and_removes_it_at_a_clean_stop():
    rig = Rig(FakeReviewer(30.0), lease=0.6, concurrency=3)
    registry = InMemoryWorkerRegistry(rig.clock)
    settings = Settings(lease_seconds=0.6, concurrency=3, worker_id="host-x:42", shutdown_grace_seconds=0.0)
    parts = Parts(queue=rig.queue, processor=rig.proc, reviewer=rig.reviewer, breaker=rig.breaker, registry=registry)
    service = on_rig(Service(settings, parts), rig)

    async def scenario():
        running = asyncio.create_task(service.run())
        try:
            await rig.until(lambda: len(registry.live()) == 1)
            [tid] = rig.submit()
            await rig.until(lambda: rig.repo.get(tid).status is TaskStatus.processing)
            await rig.until(lambda: registry.live()[0].in_flight and registry.live()[0].in_flight[0].age_s > 0.2)
            record = registry.live()[0]
            assert (record.id, record.slots, record.pid > 0) == ("host-x:42", 3, True)
            [flight] = record.in_flight
            assert (flight.task_id, flight.attempt) == (tid, 1)
            assert record.started_at < record.last_beat <= rig.clock.now_ms() / 1000
        finally:
            assert await stopped(service, running, 10)

    rig.run_loop(scenario)
    assert registry.live() == []


def test_a_stop_closes_the_reviewers_pools_on_the_services_loop():
    # Left to the garbage collector, an HTTP pool logs "Unclosed client session" into whatever runs next.
    rig = Rig(FakeReviewer(0.0), lease=0.6)
    settings = Settings(lease_seconds=0.6, worker_id="closing:1", shutdown_grace_seconds=0.0)
    parts = Parts(queue=rig.queue, processor=rig.proc, reviewer=rig.reviewer, breaker=rig.breaker)
    service = on_rig(Service(settings, parts), rig)

    async def scenario():
        running = asyncio.create_task(service.run())
        await rig.until(service.started.is_set)
        assert rig.reviewer.closed_on is None
        assert await stopped(service, running, 10)
        return asyncio.get_running_loop()

    loop = rig.run_loop(scenario)
    assert rig.reviewer.closed_on is loop


def test_a_process_that_stops_beating_disappears_after_its_ttl():
    rig = Rig(FakeReviewer(0.0), lease=0.3)
    registry = InMemoryWorkerRegistry(rig.clock)
    settings = Settings(lease_seconds=0.3, worker_id="killed:1", shutdown_grace_seconds=0.0)
    parts = Parts(queue=rig.queue, processor=rig.proc, reviewer=rig.reviewer, breaker=rig.breaker, registry=registry)
    service = on_rig(Service(settings, parts), rig)
    ttl = beat_seconds(0.3) * TTL_PERIODS

    async def scenario():
        running = asyncio.create_task(service.run())
        await rig.until(lambda: len(registry.live()) == 1)
        registry.remove = lambda worker_id: None  # a SIGKILL: nothing is removed on the way out
        assert await stopped(service, running, 10)
        assert len(registry.live()) == 1
        last_beat = registry.live()[0].last_beat
        await rig.until(lambda: registry.live() == [], timeout=ttl + 1.0)
        return last_beat

    last_beat = rig.run_loop(scenario)
    assert rig.now() == pytest.approx(last_beat + ttl, abs=0.002)  # gone when the TTL of its last beat ran out
