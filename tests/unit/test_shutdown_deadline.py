"""A stop ends in bounded time even when every write hangs (Redis or the database stopped answering
mid-shutdown): the grace, then at most ``release_seconds`` of releases, then the loops' current
cycles and leaving the registry, each with a deadline. A SIGTERMed worker once took 7 s with a 2 s
grace in CI; without the deadlines this test's service takes 30 s (the hang) or more.

On real threads and real time, unlike the other runtime tests: what it checks is that a port call
blocked in a thread (which nothing can cancel) does not hold the stop up."""

from __future__ import annotations

import threading
import time

from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.reaper import Reaper
from docllm.runtime.service import LEAVE_SECONDS, Parts, Service
from docllm.settings import Settings
from tests.support.memory.registry import InMemoryWorkerRegistry
from tests.support.runtime_rig import FakeReviewer, Rig, wait_until

HANG_SECONDS = 30.0


def test_a_stop_ends_by_its_deadline_when_every_write_hangs():
    rig = Rig(FakeReviewer(60.0), lease=1.0, concurrency=2, threads=True)
    registry = InMemoryWorkerRegistry(rig.clock)
    reaper = Reaper(rig.queue, rig.repo, rig.retry)
    settings = Settings(lease_seconds=1.0, concurrency=2, worker_id="w", shutdown_grace_seconds=0.2)
    parts = Parts(
        queue=rig.queue,
        processor=rig.proc,
        reviewer=rig.reviewer,
        breaker=rig.breaker,
        registry=registry,
        reaper=reaper,
    )
    service = Service(settings, parts).start()
    ids = rig.submit(2)
    wait_until(lambda: rig.statuses(ids) == [TaskStatus.processing] * 2)

    released = threading.Event()  # lets the hung threads go at the end of the test

    def hang(*_args: object) -> None:
        released.wait(HANG_SECONDS)

    # From now on every write of the stop hangs: the releases, the reaper's cycle, leaving the registry.
    rig.proc.finish = hang
    service.worker.commits.send = hang  # the reports' commits
    rig.proc.hand_back = hang
    rig.queue.requeue = hang
    reaper.reap_once = hang
    registry.remove = hang
    try:
        started = time.monotonic()
        assert service.wait(HANG_SECONDS)
        took = time.monotonic() - started
    finally:
        released.set()
    bound = settings.shutdown_grace_seconds + service.worker.release_seconds + LEAVE_SECONDS
    assert took < bound + 3.0, f"the stop took {took:.1f}s, its deadline is {bound:.1f}s"  # HANG_SECONDS if it hangs
    # Nothing was written: the rows stay `processing` under leases that expire; the reaper settles them.
    assert rig.statuses(ids) == [TaskStatus.processing] * 2
    assert rig.reviewer.cancelled == 2
