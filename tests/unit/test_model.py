import random

import pytest

from docllm.domain.errors import BadPayload
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.payload import make_payload, parse_payload
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy

S = TaskStatus


def test_terminal_statuses():
    assert [s for s in S if s.terminal] == [S.success, S.failed]


def test_attempt_budget():
    t = Task(1, "x", S.processing, attempt=7, retry_count=2, max_attempts=3)
    assert t.last_attempt(5)  # the row's own budget wins over the default
    assert not Task(1, "x", S.processing, retry_count=1).last_attempt(3)
    assert Task(1, "x", S.processing, retry_count=2).last_attempt(3)


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("not json", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"task_name": "a"}', "no task_id"),
        ('{"task_id": "abc"}', "not an integer"),
        ('{"task_id": 1.5}', "not an integer"),
        ('{"task_id": true}', "not an integer"),
        ('{"task_id": 0}', "not positive"),
    ],
)
def test_bad_payloads_say_why(raw, reason):
    with pytest.raises(BadPayload, match=reason):
        parse_payload(raw, 1024)


def test_payload_size_limit():
    with pytest.raises(BadPayload, match="over the limit"):
        parse_payload(make_payload(1, "x" * 100), 50)


def test_payload_round_trip_and_producer_forms():
    assert parse_payload(make_payload(7, "文档.md"), 1024).task_id == 7
    assert parse_payload('{"task_id": "12", "task_name": "a"}', 1024).task_id == 12
    assert make_payload(1, "a") == '{"task_id": 1, "task_name": "a"}'  # the note's producers' bytes


def test_backoff_grows_is_capped_and_jittered():
    policy = RetryPolicy(max_attempts=10, base_seconds=2, cap_seconds=60, jitter=0.5, rng=random.Random(1))
    delays = [policy.delay_seconds(n) for n in range(1, 10)]
    assert all(0 < d <= 60 for d in delays)
    assert delays[0] <= 2 and delays[-1] >= 30
    assert len({round(d, 6) for d in delays}) == len(delays)  # jitter: no two alike
    assert policy.delay_seconds(1, retry_after=45) >= 45  # Retry-After is honoured
    assert policy.delay_seconds(1, retry_after=10_000) <= 60  # but capped


def test_lease_policy_numbers():
    lease = LeasePolicy(lease_seconds=30, max_runtime_seconds=600, reaper_interval_seconds=5)
    assert lease.heartbeat_seconds == 10
    assert lease.lease_ms == 30_000
    assert lease.stuck_bound_seconds(1) == 36


def test_a_payload_that_is_not_utf8_is_malformed():
    raw = b'{"task_id": 1, "x": "\xff"}'.decode("utf-8", "surrogateescape")  # as the Redis adapter carries it
    with pytest.raises(BadPayload, match="UTF-8"):
        parse_payload(raw, 1024)
    with pytest.raises(BadPayload, match="UTF-8"):
        parse_payload(b"\xff\xfe", 1024)
