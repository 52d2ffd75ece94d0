"""The DashboardSessions port over Redis (docs/DEPLOY.md, Security): a random signing key and a
random session generation under the queue's prefix, made once (SET NX: every process of the fleet
reads the same ones), and failed logins counted per client in windows of the authority clock.

If Redis forgets them, new ones are made: every cookie signed before is refused, never revived
(a generation is random, not a counter a later logout could count back to).
"""

from __future__ import annotations

import secrets
from typing import Any

import redis

from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.domain.tasks.ports import Clock

KEY_BYTES = 32
WINDOW_MS = 60_000


class RedisDashboardSessions:
    def __init__(self, client: redis.Redis, keys_or_prefix: RedisKeys | str, clock: Clock, window_ms: int = WINDOW_MS):
        prefix = RedisKeys.of(keys_or_prefix).prefix
        self._client, self._clock, self.window_ms = client, clock, window_ms
        self._key, self._generation = f"{prefix}:dashboard:key", f"{prefix}:dashboard:generation"
        self._failures = f"{prefix}:dashboard:failures"

    def current(self) -> tuple[bytes, str]:
        with redis_errors("dashboard session"):
            key, generation = self._client.mget(self._key, self._generation)
            if key is None or generation is None:  # first use, or Redis forgot them
                self._client.set(self._key, secrets.token_hex(KEY_BYTES), nx=True)
                self._client.set(self._generation, secrets.token_hex(16), nx=True)
                key, generation = self._client.mget(self._key, self._generation)
        return bytes.fromhex(_text(key)), _text(generation)

    def end_all(self) -> str:
        generation = secrets.token_hex(16)
        with redis_errors("dashboard logout"):
            self._client.set(self._generation, generation)
        return generation

    def failures(self, client: str) -> int:
        with redis_errors("dashboard login"):
            return int(self._client.get(self._window(client)) or 0)

    def fail(self, client: str) -> int:
        key = self._window(client)
        with redis_errors("dashboard login"):
            pipe = self._client.pipeline(transaction=True)
            pipe.incr(key)
            pipe.pexpire(key, 2 * self.window_ms)
            count, _ = pipe.execute()
        return int(count)

    def _window(self, client: str) -> str:
        return f"{self._failures}:{self._clock.now_ms() // self.window_ms}:{client}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
