"""The LlmBreaker contract: the in-memory twin, breaker.lua on fakeredis and on a real Redis."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import fakeredis
import pytest
import redis

from docllm.adapters.redis.breaker import RedisLlmBreaker
from docllm.domain.llm.breaker import BreakerPolicy, BreakerState
from docllm.domain.llm.ports import LlmBreaker
from sim.manual_clock import ManualClock
from tests.support.memory.breaker import InMemoryLlmBreaker

POLICY = BreakerPolicy(window_seconds=60, failure_ratio=0.5, min_calls=4, open_seconds=30)


@dataclass
class BreakerUnderTest:
    name: str
    breaker: LlmBreaker
    clock: ManualClock

    def fail(self, n: int = 1) -> None:
        for _ in range(n):
            self.breaker.record(False)

    def succeed(self, n: int = 1) -> None:
        for _ in range(n):
            self.breaker.record(True)

    def state(self) -> BreakerState:
        return self.breaker.view().state


@pytest.fixture(params=["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.redis_server)])
def subject(request: pytest.FixtureRequest) -> Iterator[BreakerUnderTest]:
    clock = ManualClock()
    if request.param == "memory":
        yield BreakerUnderTest("memory", InMemoryLlmBreaker(clock, POLICY), clock)
        return
    if request.param == "fakeredis":
        client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        client.flushall()
    yield BreakerUnderTest(request.param, RedisLlmBreaker(client, "{docllm}", clock, POLICY), clock)
    client.close()


def test_adapter_has_every_method_of_the_port(subject: BreakerUnderTest) -> None:
    wanted = {name for name in vars(LlmBreaker) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(subject.breaker, name, None))} == set()


def test_closed_at_first_and_counts_the_window(subject: BreakerUnderTest) -> None:
    subject.succeed(2)
    subject.fail()
    view = subject.breaker.view()
    assert (view.state, view.calls, view.failures) == (BreakerState.closed, 3, 1)
    assert view.last_ok_ms == subject.clock.now_ms()


def test_one_record_counts_many_successes(subject: BreakerUnderTest) -> None:
    subject.breaker.record(True, 5)  # a process sends the successes of one round trip together
    subject.fail(4)
    view = subject.breaker.view()
    assert (view.state, view.calls, view.failures) == (BreakerState.closed, 9, 4)  # 4 of 9 < 0.5
    assert subject.breaker.record(False).changed == "opened"  # 5 of 10


def test_fewer_calls_than_the_minimum_never_open_it(subject: BreakerUnderTest) -> None:
    subject.fail(3)
    assert subject.state() is BreakerState.closed


def test_a_failure_ratio_at_the_threshold_opens_it_once(subject: BreakerUnderTest) -> None:
    subject.succeed(2)
    subject.fail()
    assert subject.breaker.record(False).changed == "opened"  # 2 of 4
    again = subject.breaker.record(False)
    assert (again.state, again.changed, again.transitions) == (BreakerState.open, "", 1)
    assert again.opened_at_ms == subject.clock.now_ms()


def test_a_document_failing_among_successes_does_not_open_it(subject: BreakerUnderTest) -> None:
    for _ in range(10):
        subject.succeed(3)
        subject.fail()
    assert subject.state() is BreakerState.closed


def test_outcomes_older_than_the_window_no_longer_count(subject: BreakerUnderTest) -> None:
    subject.fail(3)
    subject.clock.advance(61_000)
    subject.fail()
    view = subject.breaker.view()
    assert (view.state, view.calls) == (BreakerState.closed, 1)


def test_open_becomes_half_open_after_the_interval_on_the_authority_clock(subject: BreakerUnderTest) -> None:
    subject.fail(4)
    subject.clock.advance(29_999)
    assert subject.state() is BreakerState.open
    assert not subject.breaker.try_probe("w1")
    subject.clock.advance(1)
    assert subject.state() is BreakerState.half_open


def test_one_probe_lease_at_a_time(subject: BreakerUnderTest) -> None:
    subject.fail(4)
    subject.clock.advance(30_000)
    assert subject.breaker.try_probe("w1")
    assert not subject.breaker.try_probe("w2")
    assert not subject.breaker.try_probe("w1")
    subject.clock.advance(30_001)  # the prober died: its lease ends, another may probe
    assert subject.breaker.try_probe("w2")


def test_a_probe_that_passes_closes_it_with_a_fresh_window(subject: BreakerUnderTest) -> None:
    subject.fail(4)
    subject.clock.advance(30_000)
    assert subject.breaker.try_probe("w1")
    assert subject.breaker.probe_result("w2", True).state is BreakerState.half_open  # not the prober
    view = subject.breaker.probe_result("w1", True)
    assert (view.state, view.changed, view.calls, view.transitions) == (BreakerState.closed, "closed", 0, 2)
    assert view.open_ms_total == 30_000 and view.opened_at_ms is None
    subject.fail()  # the outage's failures are gone: one more does not reopen it
    assert subject.state() is BreakerState.closed


def test_a_probe_that_fails_keeps_it_open_for_another_interval(subject: BreakerUnderTest) -> None:
    subject.fail(4)
    opened = subject.clock.now_ms()
    subject.clock.advance(30_000)
    assert subject.breaker.try_probe("w1")
    view = subject.breaker.probe_result("w1", False)
    assert (view.state, view.changed, view.opened_at_ms) == (BreakerState.open, "reopened", opened)
    assert view.probe_at_ms == subject.clock.now_ms() + 30_000
    assert not subject.breaker.try_probe("w2")
    subject.clock.advance(30_000)
    assert subject.breaker.try_probe("w2")


def test_a_backward_clock_step_does_not_keep_it_open_for_the_step(subject: BreakerUnderTest) -> None:
    subject.fail(4)
    subject.clock.advance(-3_600_000)
    assert subject.state() is BreakerState.open  # every process looks often: the first look clamps
    subject.clock.advance(30_000)
    assert subject.state() is BreakerState.half_open
    assert subject.breaker.try_probe("w1")


def test_outcomes_recorded_while_open_do_not_close_it(subject: BreakerUnderTest) -> None:
    subject.fail(4)
    view = subject.breaker.record(True)
    assert (view.state, view.changed) == (BreakerState.open, "")
