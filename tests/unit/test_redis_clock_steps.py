"""RedisServerClock tells a step of the server's clock from time passing (ARCHITECTURE.md, Clocks) and
reports a forward step before anyone gets the new time."""

from __future__ import annotations

import pytest

from docllm.adapters.redis.clock import RedisServerClock
from docllm.domain.errors import Unavailable


class FakeServer:
    """``time()`` of a Redis server whose clock the test moves; ``mono`` is the local monotonic."""

    def __init__(self) -> None:
        self.mono = 100.0
        self.offset_ms = 1_700_000_000_000
        self.down = False
        self.reads = 0

    def time(self) -> tuple[int, int]:
        self.reads += 1
        if self.down:
            import redis

            raise redis.ConnectionError("down")
        ms = self.offset_ms + int(self.mono * 1000)
        return ms // 1000, (ms % 1000) * 1000


class Reports(list[tuple[int, int, int, int]]):
    pass


def make(server: FakeServer, reports: Reports) -> RedisServerClock:
    clock = RedisServerClock(server, resync_seconds=10, monotonic=lambda: server.mono, lease_ms=30_000)  # type: ignore[arg-type]
    clock.watch_steps(lambda *report: reports.append(report))
    return clock


def test_time_passing_is_not_a_step() -> None:
    server, reports = FakeServer(), Reports()
    clock = make(server, reports)
    first = clock.now_ms()
    server.mono += 3_600  # an hour passes, read every 10 s or not
    assert clock.now_ms() == first + 3_600_000
    assert reports == [] and clock.steps == 0


def test_a_forward_step_is_reported_before_the_new_time_is_handed_out() -> None:
    server, reports = FakeServer(), Reports()
    clock = make(server, reports)
    before = clock.now_ms()
    server.offset_ms += 3_600_000
    server.mono += 10
    now = clock.now_ms()
    assert now == before + 10_000 + 3_600_000
    assert reports == [(now, before + 10_000, 10_000, 30_000)]  # the new time, the old one, a lease
    server.mono += 10
    clock.now_ms()
    assert len(reports) == 1  # once


def test_a_report_that_fails_withholds_the_new_time_until_it_lands() -> None:
    server, reports = FakeServer(), Reports()
    clock = make(server, reports)
    clock.now_ms()
    server.offset_ms += 60_000
    server.mono += 10

    def unreachable(*_: int) -> None:
        raise Unavailable("redis down")

    clock.watch_steps(unreachable)
    with pytest.raises(Unavailable):
        clock.now_ms()
    clock.watch_steps(lambda *report: reports.append(report))
    clock.now_ms()
    assert len(reports) == 1


def test_a_backward_step_is_reported_too() -> None:
    server, reports = FakeServer(), Reports()
    clock = make(server, reports)
    before = clock.now_ms()
    server.offset_ms -= 3_600_000
    server.mono += 10
    now = clock.now_ms()
    assert now == before + 10_000 - 3_600_000
    assert reports == [(now, before + 10_000, 10_000, 30_000)] and clock.steps == 1


def test_a_verdict_reads_the_servers_time_afresh_and_sees_a_step_at_once() -> None:
    server, reports = FakeServer(), Reports()
    clock = make(server, reports)
    clock.now_ms()
    server.mono += 1
    server.offset_ms -= 3_600_000
    assert clock.now_ms() == server.offset_ms + 3_600_000 + 101_000  # a second ago's reading, advanced
    now = clock.fresh_ms()
    assert now == server.offset_ms + 101_000 and server.reads == 2
    assert len(reports) == 1  # reported before the verdict's time is handed out


def test_no_verdict_of_expiry_for_half_a_lease_after_the_first_reading() -> None:
    # The first reading has nothing before it to be checked against (RELIABILITY.md, clock steps).
    server, reports = FakeServer(), Reports()
    clock = make(server, reports)
    assert clock.verdict_ms() is None
    server.mono += 14.9
    assert clock.verdict_ms() is None
    assert clock.fresh_ms() == server.offset_ms + 114_900  # renewals do not wait
    server.mono += 0.1
    assert clock.verdict_ms() == server.offset_ms + 115_000
    assert server.reads == 4
