"""One backoff (issue 23): ``Backoff``, ``RetryPolicy.delay_seconds`` and ``sql_engine.TransientRetry``
all take their schedule from ``domain/backoff.py``. The formulas each used to carry are kept here as
the reference: the delays, jitter ranges and caps are what they were, draw for draw."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.exc import TimeoutError as PoolTimeout

from docllm.adapters.sql.engine import TransientRetry
from docllm.domain.backoff import Backoff, capped_delay, jittered
from docllm.domain.tasks.policies import RetryPolicy

bases = st.floats(min_value=0.001, max_value=10.0)
caps = st.floats(min_value=0.01, max_value=1000.0)
seeds = st.integers(0, 2**32)


@given(bases, caps, st.integers(1, 40))
def test_backoff_counts_up_to_its_cap_as_before(base, cap, tries):
    backoff = Backoff(base, cap)
    assert [backoff.next() for _ in range(tries)] == [min(cap, base * 2.0 ** min(n, 60)) for n in range(tries)]


@given(bases, caps, st.floats(0.0, 1.0), st.integers(1, 40), seeds)
def test_retry_policy_delays_are_what_they_were(base, cap, jitter, failed, seed):
    policy = RetryPolicy(base_seconds=base, cap_seconds=cap, jitter=jitter, rng=random.Random(seed))
    draw = random.Random(seed).random()
    old = min(cap, base * (2.0 ** max(0, failed - 1))) * (1.0 - jitter * draw)
    assert policy.delay_seconds(failed) == old
    assert policy.max_total_backoff() == sum(
        min(cap, base * 2.0 ** (n - 1))
        for count in (policy.max_attempts, policy.max_handbacks)
        for n in range(1, count + 1)
    )


@given(st.floats(0.001, 1.0), st.floats(0.01, 5.0), st.integers(2, 12), seeds)
def test_transient_retry_sleeps_what_it_slept(base, cap, tries, seed):
    slept: list[float] = []
    retry = TransientRetry(tries=tries, base_delay=base, max_delay=cap, sleep=slept.append)
    random.seed(seed)
    try:
        retry(lambda: (_ for _ in ()).throw(PoolTimeout("QueuePool limit reached")))
    except Exception:  # noqa: BLE001 - Unavailable after the last try
        pass
    random.seed(seed)
    old = [min(cap, base * 2 ** (tried - 1)) * (0.5 + random.random() / 2) for tried in range(1, tries)]
    assert slept == old
    assert all(min(cap, base * 2**n) / 2 <= s < min(cap, base * 2**n) for n, s in enumerate(slept))


def test_the_pieces():
    assert [capped_delay(1.0, 10.0, n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert capped_delay(1.0, 10.0, 10_000) == 10.0  # no float overflow however many failures
    assert jittered(8.0, 0.5, 0.0) == 8.0 and jittered(8.0, 0.5, 1.0) == 4.0
