"""The RateLimiter port over Redis: one hash per base URL and model, in the queue's hash tag,
changed only by ``lua/rate_limit.lua`` on the authority clock (ARCHITECTURE.md, LLM boundary)."""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

import redis

from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.domain.llm.rate_limits import Budget, LimitState, ProviderHints, headroom
from docllm.domain.tasks.ports import Clock


def deployment_digest(base_url: str, model: str, name: str | None = None) -> str:
    """What names one deployment in Redis (its limit, its breaker): its ``name`` in
    DOCLLM_LLM_DEPLOYMENTS, so two keys on one URL and model are two deployments; without one (the
    single-URL settings, keyed so since before there were several), its base URL and model."""
    ident = f"name\n{name}" if name is not None else f"{base_url.rstrip('/')}\n{model}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def limit_key(keys: RedisKeys, base_url: str, model: str, name: str | None = None) -> str:
    """``{prefix}:llm:limit:<digest>``: workers of one queue that call one deployment share it."""
    return f"{keys.prefix}:llm:limit:{deployment_digest(base_url, model, name)}"


def breaker_key(keys: RedisKeys, base_url: str, model: str, name: str | None = None) -> str:
    """``{prefix}:llm:breaker:<digest>``: one deployment's breaker, when there are several."""
    return f"{keys.breaker}:{deployment_digest(base_url, model, name)}"


# The hash's fields, in the order the script's peek returns them (lua/rate_limit.lua).
FIELDS = (
    "rtat",
    "ttat",
    "hold",
    "preq",
    "preq_seen",
    "preq_rate",
    "preq_at",
    "ptok",
    "ptok_seen",
    "ptok_rate",
    "ptok_at",
    "seen",
)


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
        *,
        name: str | None = None,  # the deployment's, with several (``deployment_digest``)
    ):
        self.key = limit_key(RedisKeys.of(keys_or_prefix), base_url, model, name)
        self._clock, self._rpm, self._tpm = clock, rpm or 0, tpm or 0
        text = (resources.files("docllm.adapters.redis") / "lua" / "rate_limit.lua").read_text("utf-8")
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
            "" if h.limit_requests is None else h.limit_requests,
            "" if h.limit_tokens is None else h.limit_tokens,
        )

    def headroom(self) -> dict[str, Any]:
        now = self._clock.now_ms()
        raw = [x.decode() if isinstance(x, bytes) else x for x in self._run("peek", now, 0)]
        f = dict(zip(FIELDS, (float(x) if x else None for x in raw), strict=True))

        def budget(b: str) -> Budget | None:
            if f[b] is None:
                return None
            return Budget(f[b] or 0.0, f[f"{b}_seen"] or 0.0, f[f"{b}_rate"] or 0.0, f[f"{b}_at"] or 0.0)

        state = LimitState(
            f["rtat"] or 0.0, f["ttat"] or 0.0, f["hold"] or 0.0, budget("preq"), budget("ptok"), f["seen"] or 0.0
        )
        return headroom(state, now, self._rpm, self._tpm)
