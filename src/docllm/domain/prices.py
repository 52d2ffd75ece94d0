"""The price table of ``DOCLLM_LLM_PRICES``: USD per million input and output tokens, per model.

Format: ``MODEL=INPUT/OUTPUT`` entries separated by commas, e.g.
``gpt-4o-mini=0.15/0.60,gpt-4o=2.5/10``; ``*`` prices every model not listed. A model name may
contain ``/`` (``meta-llama/llama-3-8b=0.05/0.08``): the prices are what follows the last ``=``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PER = 1_000_000


@dataclass(frozen=True)
class Price:
    input_per_m: float
    output_per_m: float


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
                raise ValueError(f"entry {entry!r} is not MODEL=INPUT/OUTPUT (USD per 1M tokens)")
            if model in entries:
                raise ValueError(f"model {model!r} is priced twice")
            entries[model] = Price(*(_amount(p, entry) for p in _pair(prices, entry)))
        return cls(tuple(entries.items()))

    def price(self, model: str) -> Price | None:
        found = dict(self.entries)
        return found.get(model, found.get("*"))

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD for these tokens, or None when the table has no price for ``model``."""
        price = self.price(model)
        if price is None:
            return None
        return (prompt_tokens * price.input_per_m + completion_tokens * price.output_per_m) / PER

    def __str__(self) -> str:
        return ",".join(f"{m}={p.input_per_m:g}/{p.output_per_m:g}" for m, p in self.entries)


def _pair(prices: str, entry: str) -> tuple[str, str]:
    parts = prices.split("/")
    if len(parts) != 2:
        raise ValueError(f"entry {entry!r}: prices must be INPUT/OUTPUT (USD per 1M tokens)")
    return parts[0], parts[1]


def _amount(raw: str, entry: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"entry {entry!r}: {raw.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"entry {entry!r}: a price must be a finite number >= 0")
    return value
