"""The RateLimiter port (ARCHITECTURE.md, LLM boundary): in memory, the Lua script on fakeredis and on a real
redis-server, all on a ManualClock, and the script held to the domain's arithmetic step by step."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

import fakeredis
import pytest
import redis

from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.rate_limiter import RedisRateLimiter, limit_key
from docllm.domain.llm.ports import RateLimiter
from docllm.domain.llm.rate_limits import MAX_COUNT, MAX_RESET_S, MAX_RETRY_AFTER_S, PACE, ProviderHints
from docllm.domain.tasks.ports import Clock
from sim.manual_clock import ManualClock
from tests.support.memory.rate_limiter import InMemoryRateLimiter

Make = Callable[..., RateLimiter]


@pytest.fixture(params=["memory", "fakeredis", pytest.param("redis", marks=pytest.mark.redis_server)])
def make(request: pytest.FixtureRequest) -> Iterator[tuple[ManualClock, Make]]:
    clock = ManualClock()
    if request.param == "memory":
        shared: dict[str, InMemoryRateLimiter] = {}  # one process: its workers share one limiter per model

        def build_in_memory(
            rpm: int | None = None, tpm: int | None = None, model: str = "m", on: Clock | None = None
        ) -> RateLimiter:
            limiter = shared.setdefault(model, InMemoryRateLimiter(clock, rpm, tpm))
            return limiter if on is None else limiter.read_on(on)

        yield clock, build_in_memory
        return
    if request.param == "fakeredis":
        client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    prefix = f"{{t{random.randrange(10**9)}}}"

    def build(rpm: int | None = None, tpm: int | None = None, model: str = "m", on: Clock | None = None) -> RateLimiter:
        """A limiter of one process; ``on``: that process reads the authority's time there."""
        return RedisRateLimiter(client, prefix, on or clock, "http://llm/v1", model, rpm, tpm)

    yield clock, build
    client.close()


def _grants_in(limiter: RateLimiter, clock: ManualClock, seconds: float, tokens: int = 1) -> list[int]:
    """Ask without pause for ``seconds``, sleeping exactly as told; the times of the grants."""
    start, granted = clock.now_ms(), []
    while clock.now_ms() - start < seconds * 1000:
        wait = limiter.acquire(tokens)
        if wait <= 0:
            granted.append(clock.now_ms())
        else:
            clock.advance(wait * 1000)
    return granted


def test_no_limit_grants_everything(make):
    clock, build = make
    limiter = build()
    assert [limiter.acquire(10**6) for _ in range(50)] == [0] * 50


def test_rpm_allows_one_seconds_burst_then_paces(make):
    clock, build = make
    limiter = build(rpm=120)
    spacing = 0.5 / PACE  # a little under the limit
    assert [limiter.acquire(1), limiter.acquire(1)] == [0, 0]
    assert limiter.acquire(1) == pytest.approx(spacing, abs=0.001)
    assert limiter.acquire(1) == pytest.approx(spacing, abs=0.001), "a refused request charges nothing"
    clock.advance(math.ceil(spacing * 1000) - 2)
    assert limiter.acquire(1) > 0
    clock.advance(2)
    assert limiter.acquire(1) == 0


def test_rpm_never_grants_more_than_the_limit_in_any_minute(make):
    clock, build = make
    limiter = build(rpm=120)
    granted = _grants_in(limiter, clock, 100)
    worst = max(sum(1 for t in granted if start <= t < start + 60_000) for start in granted)
    assert 116 <= worst <= 119, worst  # 97% of the limit and its one-second burst: under the limit
    assert len(granted) >= 100 / 60 * 116


def test_tpm_charges_the_estimate_and_the_answer_corrects_it(make):
    clock, build = make
    limiter = build(tpm=6000)  # 97 tokens a second, a bucket of one second
    ms = 10 / PACE  # per token
    assert limiter.acquire(300) == 0  # bigger than the bucket: goes when it is empty, owes the rest
    # 300 tokens owed, less the bucket (1 s), plus 50 tokens
    assert limiter.acquire(50) == pytest.approx((300 * ms - 1000 + 50 * ms) / 1000, abs=0.001)
    limiter.settle(-200, ProviderHints())  # it used 100 tokens: about a bucket
    assert limiter.acquire(50) == pytest.approx((100 * ms - 1000 + 50 * ms) / 1000, abs=0.001)
    clock.advance(math.ceil(150 * ms - 1000))
    assert limiter.acquire(50) == 0
    tokens = _grants_in(limiter, clock, 120, tokens=100)
    worst = max(sum(1 for t in tokens if start <= t < start + 60_000) for start in tokens) * 100
    assert 0.97 * 6000 <= worst <= 0.97 * 6000 + 100, worst


def test_retry_after_holds_every_worker_back(make):
    clock, build = make
    one, other = build(rpm=10_000), build(rpm=10_000)
    assert one.acquire(1) == 0
    one.settle(0, ProviderHints(retry_after_s=2.0))
    assert other.acquire(1) == pytest.approx(2.0)
    clock.advance(2000)
    assert other.acquire(1) == 0


def test_the_providers_remaining_budget_is_shared_until_its_reset(make):
    clock, build = make
    limiter = build(tpm=10**9)
    limiter.settle(0, ProviderHints(remaining_requests=2, reset_requests_s=1.5))
    assert [limiter.acquire(1), limiter.acquire(1)] == [0, 0]
    assert limiter.acquire(1) == pytest.approx(1.5)
    clock.advance(1500)
    assert limiter.acquire(1) == 0
    limiter.settle(0, ProviderHints(remaining_tokens=500, reset_tokens_s=10))
    assert limiter.acquire(400) == 0
    assert limiter.acquire(400) == pytest.approx(10.0)  # 100 left: not enough for this one
    assert limiter.acquire(100) == 0


def test_a_provider_that_names_its_limit_refills_in_a_straight_line(make):
    clock, build = make
    limiter = build(rpm=10**6)
    # 0 of 100 left, full in 10 s: one more every 100 ms, not a wait of the whole 10 s.
    limiter.settle(0, ProviderHints(remaining_requests=0, reset_requests_s=10, limit_requests=100))
    assert limiter.acquire(1) == pytest.approx(0.1)
    clock.advance(250)
    assert [limiter.acquire(1), limiter.acquire(1)] == [0, 0]
    assert limiter.acquire(1) == pytest.approx(0.05)


def test_headroom_shows_what_could_go_now(make):
    clock, build = make
    limiter = build(rpm=120, tpm=6000)
    assert limiter.headroom() == {
        "rpm": 120,
        "tpm": 6000,
        "requests_available": 2,
        "tokens_available": 97,
        "hold_s": 0.0,
        "provider_remaining_requests": None,
        "provider_remaining_tokens": None,
        "provider_reset_s": None,
    }
    limiter.acquire(100)
    limiter.settle(0, ProviderHints(retry_after_s=3, remaining_requests=7, reset_requests_s=4))
    view = limiter.headroom()
    assert (view["requests_available"], view["tokens_available"], view["hold_s"]) == (1, 0, 3.0)
    assert (view["provider_remaining_requests"], view["provider_reset_s"]) == (7, 4.0)


def test_models_do_not_share_a_limit(make):
    clock, build = make
    a, b = build(rpm=60, model="a"), build(rpm=60, model="b")
    assert a.acquire(1) == 0 and a.acquire(1) > 0
    assert b.acquire(1) == 0


@pytest.mark.parametrize("steps_back", [False, True], ids=["clock-forward", "clock-steps-back-too"])
def test_the_script_does_what_the_domain_arithmetic_says(make, steps_back):
    """The same random run through the in-memory reference and the subject, step by step; with
    ``steps_back`` the authority's clock also steps back, by a jitter's few ms up to an hour."""
    clock, build = make
    reference_clock = ManualClock(clock.now_ms())
    subject, reference = build(rpm=90, tpm=20_000), InMemoryRateLimiter(reference_clock, 90, 20_000)
    rng = random.Random(7)
    for step in range(400):
        move = rng.random()
        if move < 0.5:
            tokens = rng.choice((1, 200, 900, 3000))
            assert subject.acquire(tokens) == reference.acquire(tokens), step
        elif move < 0.7:
            delta = rng.randint(-900, 400)
            hints = rng.choice(
                (
                    ProviderHints(),
                    ProviderHints(retry_after_s=rng.uniform(0, 3)),
                    ProviderHints(remaining_requests=rng.randint(0, 3), reset_requests_s=rng.uniform(0, 2)),
                    ProviderHints(remaining_tokens=rng.randint(0, 5000), reset_tokens_s=rng.uniform(0, 5)),
                    ProviderHints(
                        remaining_requests=rng.randint(0, 3),
                        reset_requests_s=rng.uniform(0, 2),
                        limit_requests=rng.choice((None, 5, 60)),
                        remaining_tokens=rng.randint(0, 5000),
                        reset_tokens_s=rng.uniform(0, 5),
                        limit_tokens=rng.choice((None, 4000, 90_000)),
                    ),
                )
            )
            subject.settle(delta, hints)
            reference.settle(delta, hints)
        else:
            ms = rng.randint(0, 2000)
            if steps_back and rng.random() < 0.3:
                ms = -rng.choice((5, 999, 1000, 1001, 1500, 60_000, 3_600_000))
            clock.advance(ms)
            reference_clock.advance(ms)
        assert subject.headroom() == reference.headroom(), step


# The authority's clock steps back (a failover to a host whose clock is behind, an NTP step).
STEPS_BACK = [pytest.param(3_600_000, id="back-1h"), pytest.param(60_000, id="back-1min")]


@pytest.mark.parametrize("step_ms", STEPS_BACK)
@pytest.mark.parametrize("sent", [1, 2], ids=["room-left", "bucket-full"])
def test_after_a_backward_clock_step_requests_are_paced_as_before_it(make, step_ms, sent):
    """The buckets keep their meaning on the new clock: each acquire after the step is told what the
    same acquire is told by a limiter whose clock never stepped."""
    clock, build = make
    limiter = build(rpm=120, tpm=6000)
    steady = ManualClock(clock.now_ms())
    unstepped = InMemoryRateLimiter(steady, rpm=120, tpm=6000)
    for _ in range(sent):
        assert limiter.acquire(40) == unstepped.acquire(40) == 0
    clock.set(clock.now_ms() - step_ms)
    waits, expected = [], []
    for _ in range(12):
        waits.append(limiter.acquire(40))
        expected.append(unstepped.acquire(40))
        ms = math.ceil(waits[-1] * 1000) if waits[-1] else 50
        clock.advance(ms)
        steady.advance(ms)
    if sent == 1:
        assert waits[0] == 0, waits  # the bucket had room: granted at once
    else:
        assert 0 < waits[0] <= 60 / (120 * PACE) + 0.001, waits  # at most one request interval
    assert waits == expected


@pytest.mark.parametrize("step_ms", STEPS_BACK)
def test_a_providers_hold_lasts_no_longer_after_a_backward_clock_step(make, step_ms):
    """A Retry-After and a spent budget the provider named before the step end when they were meant
    to, counted on the new clock."""
    clock, build = make
    one, other = build(rpm=10_000), build(rpm=10_000)
    assert one.acquire(1) == 0
    one.settle(0, ProviderHints(retry_after_s=30.0, remaining_requests=0, reset_requests_s=20.0))
    clock.advance(10_000)
    assert other.acquire(1) == pytest.approx(20.0)  # the fleet's workers ask while it holds
    clock.set(clock.now_ms() - step_ms)
    assert other.acquire(1) == pytest.approx(20.0)
    view = other.headroom()
    assert (view["hold_s"], view["provider_reset_s"], view["provider_remaining_requests"]) == (20.0, 10.0, 0)
    clock.advance(20_000 - 1)
    assert other.acquire(1) == pytest.approx(0.001)
    clock.advance(1)
    assert other.acquire(1) == 0


class _Behind:
    """A process's reading of the authority's time, ``ms`` behind another's."""

    def __init__(self, clock: Clock, ms: int):
        self._clock, self._ms = clock, ms

    def now_ms(self) -> int:
        return self._clock.now_ms() - self._ms


def test_readings_a_few_ms_apart_let_no_more_than_the_limit_through(make):
    """Processes read the authority's time a few ms apart, so its time goes back a little between
    callers all the time: that is no clock step, and gives nobody a second turn."""
    clock, build = make
    ahead, behind = build(rpm=120), build(rpm=120, on=_Behind(clock, 5))
    start, granted = clock.now_ms(), []
    while clock.now_ms() - start < 70_000:
        for caller in (ahead, behind):  # at the same moment: the second reads a time 5 ms earlier
            if caller.acquire(1) == 0:
                granted.append(clock.now_ms())
        clock.advance(20)  # a busy fleet asks every 20 ms
    worst = max(sum(1 for t in granted if s <= t < s + 60_000) for s in granted)
    assert 116 <= worst <= 119, worst  # as from one caller (test_rpm_never_grants_more_than_...)


def test_the_key_is_per_base_url_and_model_in_the_queues_hash_tag():
    keys = RedisKeys("{docllm}")
    key = limit_key(keys, "https://api.example/v1/", "gpt")
    assert key.startswith("{docllm}:llm:limit:")
    assert key == limit_key(keys, "https://api.example/v1", "gpt")
    assert key != limit_key(keys, "https://api.example/v1", "gpt-mini")
    assert key != limit_key(keys, "https://other.example/v1", "gpt")


def test_an_idle_key_expires():
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    clock = ManualClock()
    limiter = RedisRateLimiter(client, "{q}", clock, "http://llm/v1", "m", rpm=60)
    limiter.acquire(1)
    assert 0 < client.pttl(limiter.key) <= 62_000


# What a broken provider (or caller) may hand settle: each once turned the fleet's limit off for good
# (the hold or the budget's reset past what PEXPIRE and Redis's integers take).
UNBELIEVABLE = [
    pytest.param(0, ProviderHints(retry_after_s=1e20), id="retry-after-1e20"),
    pytest.param(0, ProviderHints(retry_after_s=math.inf), id="retry-after-inf"),
    pytest.param(0, ProviderHints(retry_after_s=99999999999999999), id="retry-after-99999999999999999"),
    pytest.param(0, ProviderHints(retry_after_s=math.nan), id="retry-after-nan"),
    pytest.param(0, ProviderHints(remaining_requests=0, reset_requests_s=1e20), id="reset-1e20"),
    pytest.param(0, ProviderHints(remaining_tokens=0, reset_tokens_s=math.inf, limit_tokens=10**30), id="reset-inf"),
    pytest.param(10**30, ProviderHints(), id="used-1e30-tokens"),
]


@pytest.fixture(params=["fakeredis", pytest.param("redis", marks=pytest.mark.redis_server)])
def redis_client(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    if request.param == "fakeredis":
        client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    yield client
    client.close()


@pytest.mark.parametrize("delta, hints", UNBELIEVABLE)
def test_an_unbelievable_settle_is_refused_and_the_limit_still_holds(redis_client, delta, hints):
    clock = ManualClock()
    reference_clock = ManualClock(clock.now_ms())
    limiter = RedisRateLimiter(redis_client, "{q}", clock, "http://llm/v1", "m", rpm=6, tpm=10**6)
    reference = InMemoryRateLimiter(reference_clock, rpm=6, tpm=10**6)
    limiter.settle(delta, hints)
    reference.settle(delta, hints)
    waits = []
    for _ in range(20):  # two seconds of asking
        waits.append(limiter.acquire(100))
        assert reference.acquire(100) == waits[-1]
        clock.advance(100)
        reference_clock.advance(100)
    granted = [w for w in waits if w == 0]
    assert len(granted) <= 6, waits
    assert all(0 < w <= 60 for w in waits if w != 0), waits  # the rest wait their pacing's turn
    # The key still expires: a minute after the pacing's next turn.
    assert 0 < redis_client.pttl(limiter.key) <= 60_000 + 60_000 / (6 * PACE) + 1
    assert limiter.headroom() == reference.headroom()


@pytest.mark.parametrize(
    "broken",
    [
        {"hold": "inf"},
        {"hold": "1e+23"},
        {"ttat": "1e+35"},
        {"preq": "0", "preq_seen": "0", "preq_rate": "0", "preq_at": "inf"},
        {"seen": "inf", "hold": "1e+23"},
        {"seen": "1e+300", "rtat": "1e+299"},
        {"seen": "nan"},
    ],
    ids=["hold-inf", "hold-1e23", "ttat-1e35", "reset-inf", "seen-inf", "seen-1e300", "seen-nan"],
)
def test_a_key_left_broken_is_healed_not_read_as_go_now(redis_client, broken):
    """What the script once stored from an unbelievable settle, with no TTL: a time past anything
    believed is forgotten, so acquire neither waits forever nor reads Redis's overflowed integer."""
    clock = ManualClock()
    limiter = RedisRateLimiter(redis_client, "{q}", clock, "http://llm/v1", "m", rpm=6, tpm=10**6)
    redis_client.hset(limiter.key, mapping=broken)
    waits = []
    for _ in range(20):
        waits.append(limiter.acquire(100))
        clock.advance(100)
    assert waits[0] == 0 and all(0 < w <= 60 for w in waits[1:]), waits
    assert 0 < redis_client.pttl(limiter.key) <= 60_000 + 60_000 / (6 * PACE) + 1


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-bound", "just-past-it"])
def test_the_script_holds_the_references_bounds(redis_client, over):
    clock = ManualClock()
    reference_clock = ManualClock(clock.now_ms())
    limiter = RedisRateLimiter(redis_client, "{q}", clock, "http://llm/v1", "m", rpm=6, tpm=10**6)
    reference = InMemoryRateLimiter(reference_clock, rpm=6, tpm=10**6)
    settles = [
        (0, ProviderHints(retry_after_s=MAX_RETRY_AFTER_S + over / 1000)),
        (0, ProviderHints(remaining_requests=5, reset_requests_s=MAX_RESET_S + over / 1000)),
        (0, ProviderHints(remaining_tokens=MAX_COUNT + over, reset_tokens_s=60)),
        (0, ProviderHints(remaining_tokens=0, reset_tokens_s=60, limit_tokens=MAX_COUNT + over)),
        (-MAX_COUNT - over, ProviderHints()),
        (MAX_COUNT + over, ProviderHints()),
    ]
    for step, (delta, hints) in enumerate(settles):
        limiter.settle(delta, hints)
        reference.settle(delta, hints)
        assert limiter.headroom() == reference.headroom(), step
        assert limiter.acquire(MAX_COUNT + over) == reference.acquire(MAX_COUNT + over), step
        clock.advance(1000)
        reference_clock.advance(1000)
