"""Verdicts on leases around a step of the authority clock, on a real redis-server (ARCHITECTURE.md,
Clocks; RELIABILITY.md, clock steps): a verdict reads ``TIME`` afresh, and a process's clock gives
no verdict that a lease is expired or too far out before it has read the server for half a lease.

Each "process" is a queue adapter with its own ``RedisServerClock``, as the container builds one.
A test cannot step a real server's clock, so the server's ``TIME`` is the test's (``Authority``);
the scripts, which take the verdicts, run on the real server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from docllm.adapters.redis.batch_leases import RedisBatchLeases
from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.tasks.model import Delivery
from docllm.domain.tasks.payload import make_payload

LEASE = 30_000
BEAT = LEASE / 3000  # a worker's heartbeat, and how often a clock re-reads TIME (seconds)
HOUR = 3_600_000


class Authority:
    """The Redis server's ``TIME`` as every process reads it, and their monotonic clock: the test
    moves time (``passes``) and steps the server's clock (``step``)."""

    def __init__(self) -> None:
        self.mono = 1_000.0
        self.offset_ms = 1_700_000_000_000

    def time(self) -> tuple[int, int]:
        ms = self.offset_ms + int(self.mono * 1000)
        return ms // 1000, (ms % 1000) * 1000

    def monotonic(self) -> float:
        return self.mono

    def passes(self, seconds: float) -> None:
        self.mono += seconds

    def step(self, ms: int) -> None:
        self.offset_ms += ms


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url, socket_connect_timeout=2) as conn:
        yield conn


def new_clock(authority: Authority) -> RedisServerClock:
    """A new process's clock: it has not read the server yet."""
    return RedisServerClock(
        authority,  # type: ignore[arg-type]  # what it reads is TIME
        resync_seconds=BEAT,
        monotonic=authority.monotonic,
        lease_ms=LEASE,
    )


def process(client: redis.Redis, authority: Authority) -> RedisTaskQueue:
    """A new process's queue adapter."""
    return RedisTaskQueue(client, clock=new_clock(authority))


def poller(client: redis.Redis, authority: Authority) -> RedisBatchLeases:
    """A new process's batch leases (the batch lane's pollers)."""
    queue = process(client, authority)
    return RedisBatchLeases(client, queue.keys, queue._clock, queue)


def claim(queue: RedisTaskQueue, task_id: int) -> Delivery:
    queue.push(make_payload(task_id, f"doc-{task_id}.md"))
    delivery = queue.claim(f"w{task_id}", LEASE)
    assert delivery is not None
    return delivery


def clamp(queue: RedisTaskQueue) -> int:
    return queue.clamp(LEASE, 20_000, 100)


def deadline(client: redis.Redis, queue: RedisTaskQueue, lease: Delivery) -> float | None:
    return client.zscore(queue.keys.lease_index, lease.token)


def test_a_reaper_that_starts_after_a_backward_step_leaves_a_live_lease_alone(client: redis.Redis) -> None:
    # `skew` seed 3: a worker renewed its lease, the server's clock stepped back an hour, a reaper
    # restarted; its first reading, on the new clock, put the live lease an hour out, and its clamp
    # brought the deadline to a lease from then; to the other reaper, still on the old clock, that
    # deadline was an hour ago: it charged the attempt and requeued it.
    t = Authority()
    worker = process(client, t)
    live = claim(worker, 1)
    t.passes(BEAT)
    assert worker.extend_many([live.token], LEASE) == [True]
    renewed = deadline(client, worker, live)
    t.passes(4)
    t.step(-HOUR)
    t.passes(2)
    restarted = process(client, t)
    assert clamp(restarted) == 0  # its reading has nothing before it to be checked against
    assert restarted.expired(10) == []
    assert deadline(client, worker, live) == renewed
    t.passes(4)
    assert worker.extend_many([live.token], LEASE) == [True]  # sees the step, reports it, renews
    t.passes(LEASE / 2000)
    assert clamp(restarted) == 0 and restarted.expired(10) == []  # it gives verdicts now: none due
    assert deadline(client, worker, live) == t.offset_ms + 1_000 * (t.mono - LEASE / 2000) + LEASE


def test_a_reaper_reads_the_clock_afresh_for_its_verdict(client: redis.Redis) -> None:
    # A reaper read the clock a moment before the server's clock stepped back an hour; a worker
    # that started after the step takes a lease on the new clock. To the reaper's old reading that
    # deadline is an hour ago: only a fresh reading (which sees the step, and reports it) spares it.
    t = Authority()
    reaper = process(client, t)
    reaper.expired(10)
    t.passes(LEASE / 2000)
    assert reaper.expired(10) == []  # read now, a moment before the step
    t.passes(1)
    t.step(-HOUR)
    worker = process(client, t)
    live = claim(worker, 1)
    t.passes(1)
    assert reaper.expired(10) == []
    assert worker.extend_many([live.token], LEASE) == [True]


def test_a_reaper_that_starts_after_a_forward_step_reclaims_no_live_lease(client: redis.Redis) -> None:
    # RELIABILITY.md, limit (3) before it was fixed: a reaper that starts just after a forward step
    # found the leases renewed on the old clock an hour expired, before any process that had read
    # the clock earlier reported the step, and charged them. And the worker's heartbeat must see
    # the step at once: a reading it took by the way between two beats would otherwise hold it on
    # the old clock until the beat after.
    t = Authority()
    worker = process(client, t)
    worker.now_ms()  # it starts
    t.passes(BEAT)
    live, dead = claim(worker, 1), claim(worker, 2)  # (a reading); the second one's worker dies now
    t.passes(BEAT - 1)
    assert worker.extend_many([live.token], LEASE) == [True]  # its beat
    t.passes(1.5)
    forgotten = claim(worker, 3)  # between two beats (a reading, were it not for the beats' own)
    t.passes(0.5)
    t.step(HOUR)
    t.passes(0.5)
    restarted = process(client, t)
    assert restarted.expired(10) == []  # no verdict on its first reading: every lease looks expired
    t.passes(BEAT - 2.5)
    assert worker.extend_many([live.token], LEASE) == [True]  # its next beat sees the step, reports it
    t.passes(LEASE / 2000 - BEAT + 2.5)
    assert restarted.expired(10) == []  # verdicts from now on; the step's quiet window
    # The window lasts a lease and a third from the worker's reading before the step (its beat).
    for wait in (BEAT - 2.5, BEAT):
        t.passes(wait)
        assert worker.extend_many([live.token], LEASE) == [True]
        assert restarted.expired(10) == []
    t.passes(BEAT + 1)
    assert worker.extend_many([live.token], LEASE) == [True]
    # After it: the leases nobody renewed (the dead worker's, and the one the worker forgot).
    assert {d.token for d in restarted.expired(10)} == {dead.token, forgotten.token}


def test_a_started_reapers_first_verdict_comes_half_a_lease_after_its_first_reading(client: redis.Redis) -> None:
    # What the rule costs (I1): a lease its worker let lapse is reclaimed by a reaper that has just
    # started half a lease later than by one that was running.
    t = Authority()
    running, worker = process(client, t), process(client, t)
    running.expired(10)
    dead = claim(worker, 1)
    t.passes(LEASE / 1000 + 1)
    started = process(client, t)
    assert started.expired(10) == []
    assert [d.token for d in running.expired(10)] == [dead.token]
    t.passes(LEASE / 2000 - 0.1)
    assert started.expired(10) == []
    t.passes(0.1)
    assert [d.token for d in started.expired(10)] == [dead.token]


def test_a_batch_lease_holds_across_a_forward_step_and_against_a_poller_started_after_it(client: redis.Redis) -> None:
    # A batch's poller holds its lease (batch_lease.lua); the server's clock steps an hour ahead and
    # another process's poller starts. To the new clock the lease ran out an hour ago: the newcomer
    # must not take it before the holder could renew, and the holder may renew it.
    t = Authority()
    holder = poller(client, t)
    token = holder.acquire("b1", "p1", LEASE)  # a free lease: taken at once, even by a new clock
    assert token is not None
    t.passes(BEAT)
    assert holder.renew("b1", token, LEASE)
    t.passes(BEAT - 1)
    t.step(HOUR)
    t.passes(0.5)
    started = poller(client, t)
    assert started.acquire("b1", "p2", LEASE) is None  # its first reading cannot judge the lease
    t.passes(0.5)
    assert holder.renew("b1", token, LEASE)  # a fresh reading: it sees the step, reports it, renews
    t.passes(LEASE / 2000)
    assert started.acquire("b1", "p2", LEASE) is None  # live
    # The holder stops; once its lease and the step's quiet window are over, the lease is free.
    t.passes(LEASE / 1000 + 1)
    assert started.acquire("b1", "p2", LEASE) is not None
    assert not holder.renew("b1", token, LEASE)
