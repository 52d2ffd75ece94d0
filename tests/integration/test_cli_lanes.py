"""``docllm submit --priority LANE --tenant NAME`` (real Redis, SQLite): the row carries both, the
payload lands in the lane's tenant queue, and a bad value is a usage error with nothing written."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest
import redis

from docllm.adapters.redis.keys import RedisKeys
from tests.support.cli_runner import cli_runner


@pytest.fixture
def prefix():
    return f"cli{uuid.uuid4().hex[:6]}"


@pytest.fixture
def cli(redis_url, tmp_path, monkeypatch, capsys, prefix):
    monkeypatch.setenv("DOCLLM_REDIS_URL", redis_url)
    monkeypatch.setenv("DOCLLM_DATABASE_URL", f"sqlite:///{tmp_path / 'docllm.db'}")
    monkeypatch.setenv("DOCLLM_QUEUE_PREFIX", prefix)
    run = cli_runner(capsys)
    assert run("init-db")[0] == 0
    return run


def test_submit_with_a_lane_and_a_tenant(cli, redis_url, prefix, tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# A\n")
    code, out, _ = cli("submit", str(doc), "--priority", "interactive", "--tenant", "acme", "--json")
    assert code == 0
    [task] = json.loads(out)
    assert (task["priority"], task["tenant"]) == ("interactive", "acme")
    with sqlite3.connect(tmp_path / "docllm.db") as db:  # the views show lanes in another slice
        assert db.execute("SELECT priority, tenant FROM task_doc_llm").fetchall() == [("interactive", "acme")]
    keys, client = RedisKeys(prefix), redis.Redis.from_url(redis_url)
    assert client.lrange(keys.ring_interactive, 0, -1) == [b"acme"]
    assert json.loads(cli("stats", "--json")[1])["queue"]["ready"] == 1


@pytest.mark.parametrize("args", [("--priority", "urgent"), ("--tenant", "a b")])
def test_a_bad_lane_or_tenant_is_a_usage_error_and_nothing_is_written(cli, tmp_path, args):
    doc = tmp_path / "a.md"
    doc.write_text("# A\n")
    code, out, err = cli("submit", str(doc), *args)
    assert code == 2 and out == "" and args[0] in err
    stats = json.loads(cli("stats", "--json")[1])
    assert sum(stats["tasks"].values()) == 0 and sum(stats["queue"].values()) == 0
