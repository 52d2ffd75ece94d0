"""The SpendBudget port over Redis: one script (``lua/budget.lua``) adds an attempt's spend to
the day's count, and each deployment's share to the day's hash of them, and reads the fleet's
cap, atomically, in the queue's hash tag. The day is read from the authority clock (the Redis
server's TIME), never this host's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.queue.base import script_text
from docllm.domain.budget import KEEP_MS, BudgetView, cap_in_force, day_of, micro
from docllm.domain.ports import Clock


class RedisSpendBudget:
    def __init__(self, client: redis.Redis, keys_or_prefix: RedisKeys | str, clock: Clock, cap_usd: float = 0.0):
        """``cap_usd``: this process's setting (DOCLLM_SPEND_CAP_USD_PER_DAY), 0 for none."""
        self._client, self._keys, self._clock, self.cap_usd = client, RedisKeys.of(keys_or_prefix), clock, cap_usd
        self._script = client.register_script(script_text("budget"))

    def add(self, micro_usd: int, by_deployment: Mapping[str, int] | None = None) -> BudgetView:
        shares = [x for name, amount in (by_deployment or {}).items() if amount > 0 for x in (name, int(amount))]
        return self._run("add", max(0, int(micro_usd)), shares)

    def view(self) -> BudgetView:
        return self._run("view")

    def set_cap(self, usd: float | None) -> BudgetView:
        with redis_errors("budget set"):
            if usd is None:
                self._client.delete(self._keys.spend_cap)
            else:
                self._client.set(self._keys.spend_cap, micro(usd))
        return self.view()

    def _run(self, op: str, amount: int = 0, shares: list[Any] | None = None) -> BudgetView:
        day = day_of(self._clock.now_ms())
        keys = [self._keys.spend(day), self._keys.spend_cap, self._keys.spend_by_deployment(day)]
        with redis_errors(f"budget {op}"):
            reply: list[Any] = self._script(keys=keys, args=[op, amount, KEEP_MS, *(shares or [])])
        spent, fleet, flat = int(reply[0]), int(reply[1]), reply[2]
        cap, source = cap_in_force(self.cap_usd, None if fleet < 0 else fleet)
        by_deployment = {_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        return BudgetView(day, spent, cap, source, by_deployment)


def _text(name: bytes | str) -> str:
    return name.decode() if isinstance(name, bytes) else name
