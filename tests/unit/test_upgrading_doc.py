"""docs/UPGRADING.md stays true: its recovery time follows from the default settings, and its
rollback command does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import fakeredis

from docllm.adapters.redis.keys import RedisKeys
from docllm.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "UPGRADING.md"


def test_the_recovery_time_follows_from_the_default_settings() -> None:
    text = DOC.read_text("utf-8")
    interval, grace = int(Settings.reconcile_interval_seconds), int(Settings.reconcile_grace_seconds)
    assert f"DOCLLM_RECONCILE_INTERVAL_SECONDS={interval}" in text
    assert f"DOCLLM_RECONCILE_GRACE_SECONDS={grace}" in text
    assert f"interval + grace = {interval} + {grace} s = {(interval + grace) // 60} minutes" in text
    assert f"DOCLLM_MAX_ATTEMPTS={Settings.max_attempts}" in text


def test_the_rollback_command_moves_waiting_retries_back_to_ready() -> None:
    text = DOC.read_text("utf-8")
    command = re.search(r'redis-cli EVAL "(.*?)" 2 (\S+) (\S+)\n', text, re.S)
    assert command is not None
    script, delayed, ready = command.groups()
    keys = RedisKeys()
    assert (delayed, ready) == (keys.delayed, keys.ready)
    client = fakeredis.FakeRedis()
    client.zadd(delayed, {'{"task_id": 1, "task_name": "甲"}': 5, '{"task_id": 2, "task_name": "乙"}': 9})
    client.lpush(ready, '{"task_id": 3, "task_name": "丙"}')
    assert client.eval(script, 2, delayed, ready) == 2
    assert client.zcard(delayed) == 0
    assert sorted(client.lrange(ready, 0, -1)) == sorted(
        s.encode()
        for s in (
            '{"task_id": 1, "task_name": "甲"}',
            '{"task_id": 2, "task_name": "乙"}',
            '{"task_id": 3, "task_name": "丙"}',
        )
    )
