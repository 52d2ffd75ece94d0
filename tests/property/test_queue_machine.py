"""Runs the state machine of ``machine.py`` against RedisTaskQueue on fakeredis (Lua) with
SqlAlchemyTaskRepository on SQLite (``test_queue_machine_memory.py``: against the in-memory
repository; two files, so that two test processes share them)."""

from __future__ import annotations

import json

import fakeredis
import pytest
from hypothesis import settings
from sqlalchemy import text

from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from tests.property.machine import QueueMachine


class RedisSqliteMachine(QueueMachine):
    def make_ports(self, clock, tokens):
        self.engine = make_engine("sqlite://")
        upgrade_schema(self.engine)
        self.client = fakeredis.FakeRedis()
        queue = RedisTaskQueue(self.client, "{docllm}", clock=clock, token_factory=tokens)
        return queue, SqlAlchemyTaskRepository(self.engine)

    def _old_take(self, stamp):
        keys = self.queue.keys
        raw = self.client.rpoplpush(keys.ready, keys.processing)
        if raw is None:
            return None
        raw = raw.decode("utf-8", "surrogateescape")
        if stamp is not None:
            try:
                self.client.hset(keys.processing_ts, int(json.loads(raw)["task_id"]), stamp)
            except (ValueError, KeyError, TypeError):
                pass  # the old worker's parse failed before its HSET
        return raw

    def _old_mark_processing(self, task_id):
        with self.engine.begin() as conn:
            conn.execute(
                text("UPDATE task_doc_llm SET status='processing' WHERE task_id=:t AND status='pending'"),
                {"t": task_id},
            )


# 100 examples x 50 steps (CI; derandomized, so the same ones each run): about 40 s alone on
# fakeredis, several times that beside other test processes. The in-memory twin runs the profile's
# 200, and tests/property/test_machine_can_fail.py shows broken mechanisms are caught.
pytestmark = [pytest.mark.timeout(900), pytest.mark.long(90)]

TestFakeRedisAndSqlite = RedisSqliteMachine.TestCase
TestFakeRedisAndSqlite.settings = settings(max_examples=min(settings().max_examples, 100))
