"""LLM deployments (DOCLLM_LLM_DEPLOYMENTS, ARCHITECTURE.md, Deployments): what each one is, read
from plain values with errors that name the entry and the key, and which one a chunk goes to next.

``route`` is the one rule of the fallback: pure, so the property tests hold it without a server.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from docllm.domain.llm.breaker import BreakerState
from docllm.domain.llm.prices import BATCH_PRICE_KEYS, Price

KEYS = frozenset(
    {
        "name",
        "base_url",
        "api_key",
        "api_key_env",
        "model",
        "rpm",
        "tpm",
        "prices",
        "order",
        "weight",
        "batch",
        "tags",
        "spend_cap_usd_per_day",
    }
)
PRICE_KEYS = frozenset({"input", "cached_input", "output", *BATCH_PRICE_KEYS})


@dataclass(frozen=True)
class Deployment:
    name: str
    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    rpm: int | None = None
    tpm: int | None = None
    price: Price | None = None  # input/output/cached input USD per 1M tokens; None: DOCLLM_LLM_PRICES prices it
    order: int = 0  # lower first
    weight: float | None = None  # set on every entry or none: then chosen at random in proportion
    batch: bool = False  # offers the Batch API
    batch_prices: dict[str, float] = field(default_factory=dict)  # its own batch rates; see prices.batch_price
    tags: Any = field(default_factory=dict)  # free: an object or a list, kept as written
    spend_cap_usd: float | None = None  # its own daily spend cap (the spend ledger, I16); None: none


def parse_deployments(data: Any, env: Mapping[str, str]) -> tuple[Deployment, ...]:
    """The deployments of a decoded list; ValueError names the entry (position and name) and the key."""
    if not isinstance(data, list) or not data:
        raise ValueError("must be a non-empty list of deployments")
    found = tuple(_one(i, raw, env) for i, raw in enumerate(data, 1))
    names = [d.name for d in found]
    for i, d in enumerate(found, 1):
        if names.index(d.name) != i - 1:
            raise ValueError(f"entry {i} ({d.name!r}): key 'name': {d.name!r} is used twice")
    weighted = [d.weight is not None for d in found]
    if any(weighted) and not all(weighted):
        i = weighted.index(False) + 1
        raise ValueError(f"entry {i} ({found[i - 1].name!r}): key 'weight': set on some entries, so needed on all")
    return found


def _one(i: int, raw: Any, env: Mapping[str, str]) -> Deployment:
    where = f"entry {i}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: must be an object")
    name = raw.get("name")
    if isinstance(name, str) and name.strip():
        where = f"entry {i} ({name!r})"

    def bad(key: str, why: str) -> ValueError:
        return ValueError(f"{where}: key {key!r}: {why}")

    for key in raw:
        if key not in KEYS:
            raise bad(key, f"unknown (known: {', '.join(sorted(KEYS))})")
    for key in ("name", "base_url", "model"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise bad(key, "required, a non-empty string")
    if not raw["base_url"].startswith(("http://", "https://")):
        raise bad("base_url", "must be an http:// or https:// URL")
    key = _api_key(raw, env, bad)
    if "order" in raw and "weight" in raw:
        raise bad("weight", "give order or weight, not both")
    price, batch_prices = _prices(raw.get("prices"), bad)
    tags = raw.get("tags", {})
    if not isinstance(tags, dict | list):
        raise bad("tags", "must be an object or a list")
    if not isinstance(raw.get("batch", False), bool):
        raise bad("batch", "must be true or false")
    return Deployment(
        name=raw["name"].strip(),
        base_url=raw["base_url"].strip(),
        model=raw["model"].strip(),
        api_key=key,
        rpm=_count(raw, "rpm", bad),
        tpm=_count(raw, "tpm", bad),
        price=price,
        order=_order(raw, bad),
        weight=_weight(raw, bad),
        batch=raw.get("batch", False),
        batch_prices=batch_prices,
        tags=tags,
        spend_cap_usd=_cap(raw, bad),
    )


def _api_key(raw: dict[str, Any], env: Mapping[str, str], bad: Any) -> str:
    if ("api_key" in raw) == ("api_key_env" in raw):
        raise bad("api_key", "give exactly one of api_key and api_key_env")
    if "api_key_env" in raw:
        var = raw["api_key_env"]
        if not isinstance(var, str) or not env.get(var):
            raise bad("api_key_env", f"names {var!r}, which is not set in the environment")
        return env[var]
    if not isinstance(raw["api_key"], str) or not raw["api_key"]:
        raise bad("api_key", "must be a non-empty string")  # never echo it: a secret
    return raw["api_key"]


def _count(raw: dict[str, Any], key: str, bad: Any) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**9:
        raise bad(key, "must be an integer from 1 to 1e9 (leave it out: no limit)")
    return value


def _order(raw: dict[str, Any], bad: Any) -> int:
    value = raw.get("order", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad("order", "must be an integer (lower first)")
    return value


def _weight(raw: dict[str, Any], bad: Any) -> float | None:
    value = raw.get("weight")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise bad("weight", "must be a number greater than 0")
    if value > 1e9:  # the weights are summed: near 1e308 the sum is inf and the draw always lands last
        raise bad("weight", "must be at most 1e9")
    return float(value)


def _cap(raw: dict[str, Any], bad: Any) -> float | None:
    value = raw.get("spend_cap_usd_per_day")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise bad("spend_cap_usd_per_day", "must be a number >= 0 (USD per day; 0 or left out: no cap)")
    return float(value) or None


def _prices(value: Any, bad: Any) -> tuple[Price | None, dict[str, float]]:
    """The realtime price and the batch rates given (``batch_input``... : ``prices.batch_price``)."""
    if value is None:
        return None, {}
    if not isinstance(value, dict):
        raise bad("prices", 'must be an object {"input": ..., "cached_input": ..., "output": ...}')
    for key in value:
        if key not in PRICE_KEYS:
            raise bad("prices", f"unknown price {key!r} (known: {', '.join(sorted(PRICE_KEYS))})")
    amounts: dict[str, float] = {}
    for key, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount < 0:
            raise bad("prices", f"{key} must be a finite number >= 0 (USD per 1M tokens)")
        amounts[key] = float(amount)
    for key in ("input", "output"):
        if key not in amounts:
            raise bad("prices", f"{key} is required (USD per 1M tokens)")
    batch = {k: v for k, v in amounts.items() if k in BATCH_PRICE_KEYS}
    return Price(amounts["input"], amounts["output"], amounts.get("cached_input")), batch


def route(
    deployments: Sequence[Deployment], states: Mapping[str, BreakerState], tried: Collection[str], draw: float
) -> Deployment | None:
    """The deployment a chunk's next try goes to; None once every one was tried.

    Not tried yet, and its breaker not open (closed, or half-open: the caller then needs the probe)
    first: the lowest ``order`` (ties: the list's order), or with weights one drawn in proportion
    (``draw`` in [0, 1)). When every one left is open, the first of those in order: as a lone
    deployment is, it is tried, and the fleet's breaker pauses claims when all of them fail."""
    left = [d for d in deployments if d.name not in tried]
    if not left:
        return None
    healthy = [d for d in left if states.get(d.name, BreakerState.closed) is not BreakerState.open]
    pool = healthy or left
    if pool[0].weight is None or not healthy:
        return min(pool, key=lambda d: d.order)  # min keeps the first of equals: the list's order
    total = sum(d.weight or 0.0 for d in pool)
    point = min(max(draw, 0.0), 1.0) * total
    for d in pool:
        point -= d.weight or 0.0
        if point < 0:
            return d
    return pool[-1]
