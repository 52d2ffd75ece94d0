"""The runtime and the fleet's LLM breaker (ARCHITECTURE.md, LLM boundary, I9): an outage charges no attempt
and stops claims, one probe at a time tests the provider, claims resume when it answers; a
document that fails while the provider serves others is charged as usual. In-memory adapters,
real threads for the port calls, real (short) time."""

from __future__ import annotations

import asyncio
import time

from docllm.domain import events as ev
from docllm.domain.breaker import BreakerState
from docllm.domain.errors import ProviderUnavailable
from docllm.domain.model import TaskStatus
from docllm.domain.services.reaper import Reaper

from .test_worker import FakeReviewer, Rig, run


class FlakyProvider(FakeReviewer):
    """``down``: every review and every check fails as an unreachable provider does; a document
    named in ``poison`` always gets a 500 while the provider serves everything else."""

    def __init__(self, seconds: float = 0.0):
        super().__init__(seconds)
        self.down = False
        self.poison: set[str] = set()
        self.sent = self.checks = 0

    async def review(self, task_name, document):
        self.sent += 1
        if self.down:
            raise ProviderUnavailable("cannot reach the LLM")
        if task_name in self.poison:
            raise ProviderUnavailable("the LLM answered 500")
        return await super().review(task_name, document)

    async def check(self):
        self.checks += 1
        if self.down:
            raise ProviderUnavailable("cannot reach the LLM")


def reaping(rig: Rig):
    """The reaper's promotion of delayed retries, as a scenario helper."""
    reaper = Reaper(rig.queue, rig.repo, rig.retry)

    async def until(predicate, timeout=15.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return
            reaper.reap_once()
            await asyncio.sleep(0.02)
        raise AssertionError("condition not reached in time")

    return until


def test_an_outage_charges_no_attempt_stops_claims_and_ends_when_the_probe_passes():
    llm = FlakyProvider(0.01)
    rig = Rig(llm, concurrency=2)
    ids = rig.submit(12)

    async def scenario(rig):
        until = reaping(rig)
        llm.down = True
        await until(lambda: rig.breaker.view().state is not BreakerState.closed)
        await asyncio.sleep(1.0)  # open for about three intervals
        started = rig.events.names().count(ev.STARTED)
        sent = llm.sent
        await asyncio.sleep(0.6)
        assert rig.events.names().count(ev.STARTED) == started, "claimed while the breaker was open"
        assert llm.sent == sent, "reviews sent while the breaker was open"
        rows = [rig.repo.get(i) for i in ids]
        assert all(r.retry_count == 0 and r.status is TaskStatus.pending for r in rows), rows
        llm.down = False
        await until(lambda: all(s is TaskStatus.success for s in rig.statuses(ids)))

    run(rig, scenario)
    assert all(rig.repo.get(i).retry_count == 0 for i in ids)
    changes = [f["change"] for name, f in rig.events.events if name == ev.BREAKER]
    assert changes[0] == "opened" and changes[-1] == "closed" and "probing" in changes
    released = [f for name, f in rig.events.events if name == ev.RELEASED and f["reason"] == "llm_outage"]
    assert released  # the attempts in flight when it broke were handed back, not charged


def test_while_down_only_one_probe_per_open_interval_reaches_the_provider():
    llm = FlakyProvider(0.0)
    rig = Rig(llm, concurrency=2)
    rig.submit(6)

    async def scenario(rig):
        llm.down = True
        await reaping(rig)(lambda: rig.breaker.view().state is not BreakerState.closed)
        await asyncio.sleep(0.2)
        checks, sent = llm.checks, llm.sent
        await asyncio.sleep(1.5)  # five open intervals of 0.3 s
        assert llm.sent == sent
        assert llm.checks - checks <= 6, llm.checks - checks

    run(rig, scenario)


def test_a_poison_document_among_healthy_ones_is_still_charged_and_fails():
    llm = FlakyProvider(0.01)
    rig = Rig(llm, concurrency=2)
    [poison] = rig.submit(1, prefix="poison")
    llm.poison.add("poison0.md")
    others = rig.submit(8)

    async def scenario(rig):
        await reaping(rig)(lambda: all(s.terminal for s in rig.statuses([poison, *others])))

    run(rig, scenario)
    row = rig.repo.get(poison)
    assert row.status is TaskStatus.failed and row.retry_count == 3 and "500" in row.error
    assert rig.statuses(others) == [TaskStatus.success] * 8
    assert rig.breaker.view().state is BreakerState.closed


def test_a_lone_poison_document_is_charged_once_the_check_passes():
    llm = FlakyProvider(0.0)
    rig = Rig(llm, concurrency=1)
    [poison] = rig.submit(1, prefix="poison")
    llm.poison.add("poison0.md")

    async def scenario(rig):
        await reaping(rig)(lambda: rig.repo.get(poison).status.terminal)

    run(rig, scenario)
    assert rig.repo.get(poison).status is TaskStatus.failed and llm.checks >= 3


def test_successes_reach_the_breaker_in_one_call_per_round_trip():
    rig = Rig(FakeReviewer(0.0))
    calls: list[int] = []
    record = rig.breaker.record

    def slow_record(ok, count=1):
        calls.append(count)
        time.sleep(0.1)  # a round trip to Redis: what is served meanwhile waits for the next call
        return record(ok, count)

    rig.breaker.record = slow_record

    async def burst():
        for _ in range(10):
            rig.gate.served()
            await asyncio.sleep(0.01)
        while rig.gate.recording is not None and not rig.gate.recording.done():
            await asyncio.sleep(0.01)

    asyncio.run(burst())
    rig.calls.close()
    assert sum(calls) == 10 and rig.breaker.view().calls == 10
    assert len(calls) <= 3, calls  # not one script per attempt
