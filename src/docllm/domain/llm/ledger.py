"""The spend ledger's pure rules (I16; the service is ``domain/llm/spend_ledger.py``): what a
deployment costs and caps (``Priced``), what a document or a batch's lines are estimated to cost,
the per-task cap, and the keys reservations are held under.

An estimate is the rate limiter's token estimate of every request as it would be sent (the prompt
by its length, a fixed completion: ``rate_limits.estimate_tokens``), priced by the one
``PriceTable.cost``. The realtime reviewer and the batch lane build their requests with the same
functions (``prompt.build_messages`` over ``chunking.split_markdown``), so the estimate is of what
is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from docllm.domain.errors import OverCostCap
from docllm.domain.llm.budget import estimated_cost
from docllm.domain.llm.prices import Price, PriceTable
from docllm.domain.review.chunking import split_markdown
from docllm.domain.review.prompt import build_messages
from docllm.domain.review.report import require_reviewable
from docllm.domain.review.rubric import Rubric


@dataclass(frozen=True)
class Priced:
    """One deployment as the ledger sees it: its name (spend is counted under it), model, price
    (the deployment's own, else DOCLLM_LLM_PRICES'; None: unpriced) and its own daily cap."""

    name: str
    model: str
    price: Price | None
    cap_usd: float | None = None
    order: int = 0

    def cost(self, requests: Iterable[Iterable[Mapping[str, object]]]) -> float | None:
        if self.price is None:
            return None
        return estimated_cost(PriceTable(((self.model, self.price),)), self.model, requests)


def document_requests(
    task_name: str, document: str, rubric: Rubric | None, max_chunk_chars: int
) -> list[list[dict[str, str]]]:
    """The messages of every chunk's request, as the realtime reviewer sends them. PermanentError for
    a document no reviewer could review (empty, binary), as the review would raise."""
    chunks = split_markdown(require_reviewable(document), max_chunk_chars)
    n = len(chunks)
    return [build_messages(task_name, c.text, c.heading, i, n, rubric) for i, c in enumerate(chunks, 1)]


def lines_requests(lines: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The messages of a batch's lines (``batch_lines.request_lines``)."""
    return [line["body"]["messages"] for line in lines]


def check_task_cap(usd: float | None, cap_usd: float | None, what: str) -> None:
    """The per-task cap (DOCLLM_TASK_MAX_COST_USD): OverCostCap when the estimate alone is over it,
    before anything is sent. ``what`` says what was estimated ("3 chunk(s) of gpt-4o at east")."""
    if usd is not None and cap_usd is not None and usd > cap_usd:
        raise OverCostCap(
            f"the document is estimated to cost {usd:.4f} USD ({what}), over the per-task cap "
            f"DOCLLM_TASK_MAX_COST_USD={cap_usd:g}: nothing was sent to the LLM"
        )


def attempt_key(task_id: int, attempt: int) -> str:
    """The key a realtime attempt's reservation is held under."""
    return f"task:{task_id}:{attempt}"


def batch_key(ref: str) -> str:
    """The key a batch's reservation is held under, from its create to its apply or return."""
    return f"batch:{ref}"
