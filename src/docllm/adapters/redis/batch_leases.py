"""The BatchLeases port over Redis: one script (``lua/batch_lease.lua``) takes, renews and gives
up the lease on polling a batch, atomically, on the authority clock, in the queue's hash tag.

The member tasks' leases are the queue's own: ``renew_tasks`` is the queue's ``extend_many`` (one
round trip, its rules), not a copy of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import redis

from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.queue.base import script_text
from docllm.domain.tasks.ports import Clock, Leases


class RedisBatchLeases:
    def __init__(
        self,
        client: redis.Redis,
        keys_or_prefix: RedisKeys | str,
        clock: Clock,
        leases: Leases,  # the queue whose task leases the batch's members hold
        token_factory: Callable[[], str] = lambda: uuid.uuid4().hex,
    ):
        self._keys, self._clock, self._leases, self._token = RedisKeys.of(keys_or_prefix), clock, leases, token_factory
        self._script = client.register_script(script_text("batch_lease"))

    def acquire(self, ref: str, owner: str, ttl_ms: int) -> str | None:
        # Taking a lease someone held is a verdict that it ran out: a fresh, checked reading
        # (RedisServerClock.verdict_ms; None: this clock has just started, so only a free lease).
        clock = self._clock
        verdict = clock.verdict_ms() if isinstance(clock, RedisServerClock) else clock.now_ms()
        now, judge = (clock.now_ms(), "") if verdict is None else (verdict, "1")
        token = self._token()
        return token if self._run("acquire", ref, token, now, ttl_ms, owner, judge) else None

    def renew(self, ref: str, token: str, ttl_ms: int) -> bool:
        clock = self._clock
        now = clock.fresh_ms() if isinstance(clock, RedisServerClock) else clock.now_ms()
        return self._run("renew", ref, token, now, ttl_ms)

    def release(self, ref: str, token: str) -> bool:
        return self._run("release", ref, token, self._clock.now_ms())

    def renew_tasks(self, tokens: list[str], lease_ms: int) -> list[bool]:
        return self._leases.extend_many(tokens, lease_ms)

    def _run(
        self, op: str, ref: str, token: str, now_ms: int, ttl_ms: int = 0, owner: str = "", judge: str = ""
    ) -> bool:
        with redis_errors(f"batch lease {op}"):
            args: list[str | int] = [op, token, now_ms, int(ttl_ms), owner, judge]
            return bool(self._script(keys=[self._keys.batch_lease(ref), self._keys.clock], args=args))
