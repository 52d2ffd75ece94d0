"""The runtime and the fleet's LLM breaker (ARCHITECTURE.md, LLM boundary, I9): an outage charges no attempt
and stops claims, one probe at a time tests the provider, claims resume when it answers; a
document that fails while the provider serves others is charged as usual. In-memory adapters and
inline port calls on virtual time (``tests.support.runtime_rig``)."""

from __future__ import annotations

import asyncio

from docllm.domain import events as ev
from docllm.domain.llm.breaker import BreakerState
from docllm.domain.tasks.model import TaskStatus
from tests.support.runtime_rig import FakeReviewer, FlakyProvider, Rig, run


def test_an_outage_charges_no_attempt_stops_claims_and_ends_when_the_probe_passes():
    llm = FlakyProvider(0.01)
    rig = Rig(llm, concurrency=2)
    ids = rig.submit(12)

    async def scenario(rig):
        until = rig.reaping()
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
        await rig.reaping()(lambda: rig.breaker.view().state is not BreakerState.closed)
        await asyncio.sleep(0.2)
        checks, sent = llm.checks, llm.sent
        await asyncio.sleep(1.5)  # five open intervals of 0.3 s
        assert llm.sent == sent
        assert llm.checks - checks == 5, llm.checks - checks  # one probe per interval

    run(rig, scenario)


def test_a_poison_document_among_healthy_ones_is_still_charged_and_fails():
    llm = FlakyProvider(0.01)
    rig = Rig(llm, concurrency=2)
    [poison] = rig.submit(1, prefix="poison")
    llm.poison.add("poison0.md")
    others = rig.submit(8)

    async def scenario(rig):
        await rig.reaping()(lambda: all(s.terminal for s in rig.statuses([poison, *others])))

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
        await rig.reaping()(lambda: rig.repo.get(poison).status.terminal)

    run(rig, scenario)
    assert rig.repo.get(poison).status is TaskStatus.failed and llm.checks >= 3


def test_successes_reach_the_breaker_in_one_call_per_round_trip():
    rig = Rig(FakeReviewer(0.0))
    calls: list[int] = []
    record = rig.breaker.record

    def counted_record(ok, count=1):
        calls.append(count)
        return record(ok, count)

    rig.breaker.record = counted_record
    rig.calls.slow[counted_record] = 0.1  # a round trip to Redis: what is served meanwhile waits for the next call

    async def burst():
        for _ in range(10):
            rig.gate.served()
            await asyncio.sleep(0.01)
        while rig.gate.recording is not None and not rig.gate.recording.done():
            await asyncio.sleep(0.01)

    rig.run_loop(burst)
    assert sum(calls) == 10 and rig.breaker.view().calls == 10
    # Not one script per attempt: the first success at once, the nine served during its round trip in the next call.
    assert calls == [1, 9], calls
