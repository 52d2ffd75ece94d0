"""The RateLimiter port over Redis: one hash per base URL and model, in the queue's hash tag,
changed only by ``lua/rate_limit.lua`` on the authority clock (DESIGN section 11)."""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

import redis

from docllm.adapters.redis_errors import redis_errors
from docllm.adapters.redis_keys import RedisKeys
from docllm.domain.ports import Clock
from docllm.domain.rate_limits import LimitState, ProviderHints, headroom


def limit_key(keys: RedisKeys, base_url: str, model: str) -> str:
    """``{prefix}:llm:limit:<digest>``: workers of one queue that call one model share it."""
    digest = hashlib.sha256(f"{base_url.rstrip('/')}\n{model}".encode()).hexdigest()[:16]
    return f"{keys.prefix}:llm:limit:{digest}"


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else repr(seconds * 1000)


class RedisRateLimiter:
    def __init__(
        self,
        client: redis.Redis,
        keys_or_prefix: RedisKeys | str,
        clock: Clock,
        base_url: str,
        model: str,
        rpm: int | None = None,
        tpm: int | None = None,
    ):
        self.key = limit_key(RedisKeys.of(keys_or_prefix), base_url, model)
        self._clock, self._rpm, self._tpm = clock, rpm or 0, tpm or 0
        text = (resources.files("docllm.adapters") / "lua" / "rate_limit.lua").read_text("utf-8")
        self._script = client.register_script(text)

    def _run(self, op: str, now: int, *args: Any) -> Any:
        with redis_errors("rate_limit"):
            return self._script(keys=[self.key], args=[op, now, self._rpm, self._tpm, *args])

    def acquire(self, tokens: int) -> float:
        return int(self._run("acquire", self._clock.now_ms(), tokens)) / 1000

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        h = hints
        self._run(
            "settle",
            self._clock.now_ms(),
            delta_tokens,
            "" if h.remaining_requests is None else h.remaining_requests,
            _ms(h.reset_requests_s),
            "" if h.remaining_tokens is None else h.remaining_tokens,
            _ms(h.reset_tokens_s),
            _ms(h.retry_after_s),
        )

    def headroom(self) -> dict[str, Any]:
        now = self._clock.now_ms()
        v = [x.decode() if isinstance(x, bytes) else x for x in self._run("peek", now, 0)]

        def num(i: int) -> float:
            return float(v[i]) if v[i] else 0.0

        state = LimitState(
            requests_tat=num(0),
            tokens_tat=num(1),
            hold_until=num(2),
            provider_requests=float(v[3]) if v[3] else None,
            provider_requests_reset=num(4),
            provider_tokens=float(v[5]) if v[5] else None,
            provider_tokens_reset=num(6),
        )
        return headroom(state, now, self._rpm, self._tpm)
