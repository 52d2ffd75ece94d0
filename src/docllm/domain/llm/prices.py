"""The price table of ``DOCLLM_LLM_PRICES``: USD per million input, output and cached input
tokens, per model.

Format: ``MODEL=INPUT/OUTPUT[/CACHED_INPUT]`` entries separated by commas, e.g.
``gpt-4o-mini=0.15/0.60/0.075,gpt-4o=2.5/10``; ``*`` prices every model not listed. A model name may
contain ``/`` (``meta-llama/llama-3-8b=0.05/0.08``): the prices are what follows the last ``=``.
Without a cached price, cached prompt tokens cost what other prompt tokens cost.

``PriceTable.cost`` is the one pricing of usage: the reviewer's calls, the per-task cap's estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

PER = 1_000_000


@dataclass(frozen=True)
class Price:
    input_per_m: float
    output_per_m: float
    cached_input_per_m: float | None = None  # None: the input price

    @property
    def cached_per_m(self) -> float:
        return self.input_per_m if self.cached_input_per_m is None else self.cached_input_per_m


@dataclass(frozen=True)
class PriceTable:
    entries: tuple[tuple[str, Price], ...] = ()

    @classmethod
    def parse(cls, text: str) -> PriceTable:
        """The table, or ValueError saying which entry is wrong and how."""
        entries: dict[str, Price] = {}
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            model, eq, prices = entry.rpartition("=")
            model = model.strip()
            if not eq or not model:
                raise ValueError(f"entry {entry!r} is not MODEL=INPUT/OUTPUT[/CACHED_INPUT] (USD per 1M tokens)")
            if model in entries:
                raise ValueError(f"model {model!r} is priced twice")
            entries[model] = Price(*(_amount(p, entry) for p in _parts(prices, entry)))
        return cls(tuple(entries.items()))

    def price(self, model: str) -> Price | None:
        found = dict(self.entries)
        return found.get(model, found.get("*"))

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float | None:
        """USD for these tokens, or None when the table has no price for ``model``. ``cached_tokens``
        are the part of ``prompt_tokens`` the provider served from its prompt cache."""
        price = self.price(model)
        if price is None:
            return None
        cached = min(max(cached_tokens, 0), prompt_tokens)
        fresh = prompt_tokens - cached
        return (fresh * price.input_per_m + cached * price.cached_per_m + completion_tokens * price.output_per_m) / PER

    def __str__(self) -> str:
        return ",".join(f"{m}={_spelled(p)}" for m, p in self.entries)


# A deployment's own batch rates (its ``prices`` object), USD per 1M tokens; each one left out is half
# the realtime rate, the Batch API's discount.
BATCH_PRICE_KEYS = ("batch_input", "batch_cached_input", "batch_output")


def batch_price(price: Price, overrides: Mapping[str, float] | None = None) -> Price:
    """What the Batch API charges for tokens priced ``price`` in realtime: every rate halved, unless
    ``overrides`` gives it (``batch_input``, ``batch_cached_input``, ``batch_output``). Without any
    cached rate, cached tokens cost what other batch input tokens cost, as in realtime."""
    given = overrides or {}
    cached = given.get("batch_cached_input")
    if cached is None and price.cached_input_per_m is not None:
        cached = price.cached_input_per_m / 2
    return Price(
        given.get("batch_input", price.input_per_m / 2),
        given.get("batch_output", price.output_per_m / 2),
        cached,
    )


def _spelled(price: Price) -> str:
    cached = "" if price.cached_input_per_m is None else f"/{price.cached_input_per_m:g}"
    return f"{price.input_per_m:g}/{price.output_per_m:g}{cached}"


def _parts(prices: str, entry: str) -> list[str]:
    parts = prices.split("/")
    if len(parts) not in (2, 3):
        raise ValueError(f"entry {entry!r}: prices must be INPUT/OUTPUT[/CACHED_INPUT] (USD per 1M tokens)")
    return parts


def _amount(raw: str, entry: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"entry {entry!r}: {raw.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"entry {entry!r}: a price must be a finite number >= 0")
    return value
