"""The SpendBudget port over Redis: one script (``lua/budget.lua``) keeps the day's spend, each
deployment's share of it and the spend ledger's reservations in flight, and reads the fleet's cap,
atomically, in the queue's hash tag. The day and every deadline are read from the authority clock
(the Redis server's TIME), never this host's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.queue.base import script_text
from docllm.domain.llm.budget import KEEP_MS, BudgetView, Grant, Settle, cap_in_force, day_of, micro
from docllm.domain.tasks.ports import Clock


class RedisSpendBudget:
    def __init__(self, client: redis.Redis, keys_or_prefix: RedisKeys | str, clock: Clock, cap_usd: float = 0.0):
        """``cap_usd``: this process's setting (DOCLLM_SPEND_CAP_USD_PER_DAY), 0 for none."""
        self._client, self._keys, self._clock, self.cap_usd = client, RedisKeys.of(keys_or_prefix), clock, cap_usd
        self._script = client.register_script(script_text("budget"))

    def add(self, micro_usd: int, by_deployment: Mapping[str, int] | None = None) -> BudgetView:
        shares = {name: int(amount) for name, amount in (by_deployment or {}).items() if amount > 0}
        rest = max(0, int(micro_usd)) - sum(shares.values())  # spent at no deployment named
        pairs = [*shares.items(), *([("", rest)] if rest > 0 else [])]
        return self._run("add", [x for pair in pairs for x in pair])[1]

    def view(self) -> BudgetView:
        return self._run("view", [])[1]

    def reserve(self, key: str, deployment: str, micro_usd: int, hold_ms: int, deployment_cap: int | None) -> Grant:
        now = self._clock.now_ms()
        setting = micro(self.cap_usd) if self.cap_usd > 0 else -1
        dep_cap = -1 if deployment_cap is None else max(0, int(deployment_cap))
        args = [key, deployment, max(0, int(micro_usd)), now + max(1, int(hold_ms)), setting, dep_cap]
        reply, view = self._run("reserve", args, now)
        return Grant(int(reply[0]) == 1, _text(reply[1]), view)

    def settle(self, items: Sequence[Settle]) -> BudgetView:
        args: list[Any] = []
        for item in items:
            shares = [(name, int(amount)) for name, amount in item.by_deployment.items() if amount > 0]
            args += [item.key or "", 1 if item.release else 0, len(shares)]
            args += [x for share in shares for x in share]
        return self._run("settle", args)[1]

    def set_cap(self, usd: float | None) -> BudgetView:
        with redis_errors("budget set"):
            if usd is None:
                self._client.delete(self._keys.spend_cap)
            else:
                self._client.set(self._keys.spend_cap, micro(usd))
        return self.view()

    def _run(self, op: str, args: list[Any], now: int | None = None) -> tuple[list[Any], BudgetView]:
        now = self._clock.now_ms() if now is None else now
        day, k = day_of(now), self._keys
        keys = [
            k.spend(day),
            k.spend_cap,
            k.spend_by_deployment(day),
            k.spend_held,
            k.spend_held_until,
            k.spend_held_by_deployment,
        ]
        with redis_errors(f"budget {op}"):
            reply: list[Any] = self._script(keys=keys, args=[op, KEEP_MS, now, *args])
        spent, fleet = int(reply[2]), int(reply[3])
        cap, source = cap_in_force(self.cap_usd, None if fleet < 0 else fleet)
        view = BudgetView(day, spent, cap, source, _pairs(reply[4]), int(reply[5]), _pairs(reply[6]))
        return reply, view


def _pairs(flat: list[Any]) -> dict[str, int]:
    return {_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def _text(name: bytes | str) -> str:
    return name.decode() if isinstance(name, bytes) else name
