"""The LlmBreaker port over Redis: one script (``lua/breaker.lua``) records, decides and grants
the probe lease atomically on the authority clock, in the queue's hash tag."""

from __future__ import annotations

from typing import Any

import redis

from docllm.adapters.redis.breaker_ops import BreakerOps
from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.queue.base import script_text
from docllm.domain.llm.breaker import BreakerPolicy, BreakerState, BreakerView
from docllm.domain.tasks.ports import Clock


def view_of(reply: list[Any]) -> BreakerView:
    """A BreakerView from the script's reply (or the in-memory twin's same list)."""
    state, now, calls, failures, opened, probe_at, last_ok, transitions, open_total, changed = reply

    def t(v: Any) -> int | None:
        return None if int(v) < 0 else int(v)

    text = changed.decode() if isinstance(changed, bytes) else str(changed)
    return BreakerView(
        state=BreakerState(state.decode() if isinstance(state, bytes) else state),
        now_ms=int(now),
        calls=int(calls),
        failures=int(failures),
        opened_at_ms=t(opened),
        probe_at_ms=t(probe_at),
        last_ok_ms=t(last_ok),
        transitions=int(transitions),
        open_ms_total=int(open_total),
        changed=text,
    )


class RedisLlmBreaker(BreakerOps):
    def __init__(
        self,
        client: redis.Redis,
        keys_or_prefix: RedisKeys | str,
        clock: Clock,
        policy: BreakerPolicy,
        key: str | None = None,  # one deployment's (rate_limiter.breaker_key); default: the fleet's
    ):
        self._key = key or RedisKeys.of(keys_or_prefix).breaker
        self._clock, self.policy = clock, policy
        self._script = client.register_script(script_text("breaker"))

    def _run(self, op: str, ok: bool = False, worker_id: str = "", count: int = 1) -> BreakerView:
        p = self.policy
        args: list[Any] = [
            op,
            self._clock.now_ms(),
            p.window_ms,
            repr(p.failure_ratio),
            p.min_calls,
            p.open_ms,
            int(ok),
            worker_id,
            count,
        ]
        with redis_errors(f"breaker {op}"):
            return view_of(self._script(keys=[self._key], args=args))
