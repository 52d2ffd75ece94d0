"""The TaskQueue for unit and property tests: the production adapter (``RedisTaskQueue``, its Lua
scripts included) on an in-process fakeredis server of its own.

There is no second implementation of the queue's rules: what a unit test sees is what Redis runs.
The one thing added is a blocking ``stage``: fakeredis answers BLMOVE on an empty list at once
instead of blocking (see tests/contract/conftest.py), so a threaded test's dispatcher would spin;
here it waits on a condition that ``push`` and the scripts' own pushes wake.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import fakeredis

from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.adapters.redis.queue.base import text
from docllm.domain.lanes.model import LanePolicy
from docllm.domain.tasks.payload import task_id_of
from docllm.domain.tasks.ports import Clock

POLL_SECONDS = 0.005  # how often a blocked stage looks again when no push woke it (a script's push)


class InMemoryTaskQueue(RedisTaskQueue):
    def __init__(
        self,
        clock: Clock,
        token_factory: Callable[[], str] | None = None,
        promote_batch: int = 100,
        lanes: LanePolicy | None = None,
    ):
        self.client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        super().__init__(
            self.client, "docllm", clock=clock, token_factory=token_factory, promote_batch=promote_batch, lanes=lanes
        )
        self._pushed = threading.Condition()

    def push(self, raw: str, front: bool = False) -> None:
        super().push(raw, front)
        with self._pushed:
            self._pushed.notify_all()

    def stage(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        while True:
            raw = super().stage(0)
            left = deadline - time.monotonic()
            if raw is not None or left <= 0:
                return raw
            with self._pushed:
                self._pushed.wait(min(left, POLL_SECONDS))

    def original_take(self, stamp: str | None = None) -> str | None:
        """What the original note's worker does: ``RPOPLPUSH ready processing`` (no lease), then
        ``HSET processing_ts task_id stamp`` when ``stamp`` is given."""
        raw = self.client.rpoplpush(self.keys.ready, self.keys.processing)
        if raw is None:
            return None
        raw = text(raw)
        task_id = task_id_of(raw)
        if stamp is not None and task_id is not None:  # the old worker's HSET fails on a payload without one
            self.client.hset(self.keys.processing_ts, task_id, stamp)
        return raw

    def original_stamp(self, task_id: int, stamp: str) -> None:
        """``HSET processing_ts task_id stamp`` alone (its payload already gone)."""
        self.client.hset(self.keys.processing_ts, task_id, stamp)
