"""The DashboardSessions contract: the in-memory twin, the Redis adapter on fakeredis and on a
real Redis (issue 50: sessions the server can end, a signing key apart from the token, a login
throttle)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fakeredis
import pytest
import redis

from docllm.adapters.redis.dashboard_sessions import RedisDashboardSessions
from docllm.domain.tasks.ports import DashboardSessions
from sim.manual_clock import ManualClock
from tests.support.memory.dashboard_sessions import InMemoryDashboardSessions

WINDOW_MS = 60_000


@dataclass
class SessionsUnderTest:
    name: str
    sessions: DashboardSessions
    clock: ManualClock
    client: Any = None  # the Redis client, None in memory


@pytest.fixture(params=["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.redis_server)])
def subject(request: pytest.FixtureRequest) -> Iterator[SessionsUnderTest]:
    clock = ManualClock()
    if request.param == "memory":
        yield SessionsUnderTest("memory", InMemoryDashboardSessions(clock, WINDOW_MS), clock)
        return
    if request.param == "fakeredis":
        client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        client.flushall()
    yield SessionsUnderTest(request.param, RedisDashboardSessions(client, "{docllm}", clock, WINDOW_MS), clock, client)
    client.close()


def test_adapter_has_every_method_of_the_port(subject: SessionsUnderTest) -> None:
    wanted = {name for name in vars(DashboardSessions) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(subject.sessions, name, None))} == set()


def test_the_key_and_generation_are_random_and_kept(subject: SessionsUnderTest) -> None:
    key, generation = subject.sessions.current()
    assert len(key) >= 32 and len(set(key)) > 8 and generation
    assert subject.sessions.current() == (key, generation)
    if subject.client is not None:  # another process of the fleet reads the same ones
        other = RedisDashboardSessions(subject.client, "{docllm}", subject.clock, WINDOW_MS)
        assert other.current() == (key, generation)


def test_ending_all_sessions_changes_the_generation_only(subject: SessionsUnderTest) -> None:
    key, first = subject.sessions.current()
    second = subject.sessions.end_all()
    assert second != first and subject.sessions.current() == (key, second)
    assert subject.sessions.end_all() not in (first, second)


def test_a_forgotten_key_is_made_anew_never_revived(subject: SessionsUnderTest) -> None:
    if subject.client is None:
        pytest.skip("only Redis can forget")
    key, generation = subject.sessions.current()
    subject.client.flushall()
    new_key, new_generation = subject.sessions.current()
    assert new_key != key and new_generation != generation


def test_failed_logins_are_counted_per_client_per_window(subject: SessionsUnderTest) -> None:
    s = subject.sessions
    assert s.failures("10.0.0.1") == 0
    assert [s.fail("10.0.0.1") for _ in range(3)] == [1, 2, 3]
    assert s.fail("::1") == 1 and s.failures("10.0.0.1") == 3 and s.failures("::1") == 1
    subject.clock.advance(WINDOW_MS)
    assert s.failures("10.0.0.1") == 0 and s.fail("10.0.0.1") == 1
