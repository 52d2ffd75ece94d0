"""BatchLeases for unit tests: the production adapter (``RedisBatchLeases``, its Lua included) on the
in-memory queue's own fakeredis server, so its member tasks' leases are that queue's (as
``InMemoryTaskQueue`` is the production queue on fakeredis: no second copy of the rules)."""

from __future__ import annotations

from docllm.adapters.redis.batch_leases import RedisBatchLeases
from docllm.domain.tasks.ports import Clock
from tests.support.memory.queue import InMemoryTaskQueue


def in_memory_batch_leases(queue: InMemoryTaskQueue, clock: Clock) -> RedisBatchLeases:
    return RedisBatchLeases(queue.client, queue.keys, clock, queue)
