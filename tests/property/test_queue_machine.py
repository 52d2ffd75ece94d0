"""Runs the state machine of ``machine.py`` against the in-memory adapters, and against
RedisTaskQueue on fakeredis (Lua) with SqlAlchemyTaskRepository on SQLite."""

from __future__ import annotations

import fakeredis

from docllm.adapters.migrations import upgrade_schema
from docllm.adapters.redis_queue import RedisTaskQueue
from docllm.adapters.sql_engine import make_engine
from docllm.adapters.sql_repository import SqlAlchemyTaskRepository
from tests.property.machine import QueueMachine


class RedisSqliteMachine(QueueMachine):
    def make_ports(self, clock, tokens):
        engine = make_engine("sqlite://")
        upgrade_schema(engine)
        queue = RedisTaskQueue(fakeredis.FakeRedis(), "{docllm}", clock=clock, token_factory=tokens)
        return queue, SqlAlchemyTaskRepository(engine)


TestInMemoryAdapters = QueueMachine.TestCase
TestFakeRedisAndSqlite = RedisSqliteMachine.TestCase
