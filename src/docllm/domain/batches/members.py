"""What the batcher and the pollers share about a batch's members (issue 28): where batches go
(``BatchTarget``), a member's attempt rebuilt from its row, and the hand-back of members that no
result will come for (uncharged: the provider's or our doing, never the document's)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from docllm.domain.batches.model import BatchMember
from docllm.domain.llm.ledger import Priced
from docllm.domain.llm.prices import Price
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, Delivery, TaskStatus
from docllm.domain.tasks.outcome import Outcome, Reason
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.ports import TaskViews


@dataclass(frozen=True)
class BatchTarget:
    """The deployment batches go to, and how its lines are built and priced."""

    deployment: str  # its name (recorded on the batch and in each chunk's report)
    model: str
    price: Price | None  # the batch price (``prices.batch_price``); None: unpriced
    max_chunk_chars: int  # DOCLLM_LLM_MAX_CHUNK_CHARS: the batcher and the pollers split alike
    cap_usd: float | None = None  # the deployment's own daily spend cap (the spend ledger, I16)

    @property
    def priced(self) -> Priced:
        """The deployment at its batch prices, as the spend ledger reserves and counts it."""
        return Priced(self.deployment, self.model, self.price, self.cap_usd)


def member_attempts(
    proc: TaskProcessor, members: Iterable[BatchMember], views: TaskViews | None = None
) -> list[Attempt]:
    """The members whose row is still ``processing`` on the batch's attempt, as attempts the
    processor's fenced finish can end (the lease token is the row's; the payload is rebuilt from
    the row, for the one fallback that pushes it when the lease is gone). With ``views``: the rows
    in one query, without their documents (``TaskViews.get_many``); else one read per member."""
    members = list(members)
    if views is not None:
        rows = {r.task_id: r for r in views.get_many([m.task_id for m in members])}
    else:
        rows = {m.task_id: r for m in members if (r := proc.repo.get(m.task_id)) is not None}
    found = []
    for m in members:
        row = rows.get(m.task_id)
        if row is None or row.status is not TaskStatus.processing or row.attempt != m.attempt or not row.lease_token:
            continue
        raw = make_payload(row.task_id, row.task_name or "", row.priority, row.tenant)
        delivery = Delivery(raw, row.lease_token, 0, proc.worker_id, 0)
        found.append(Attempt(delivery=delivery, task=row, started_ms=proc.clock.now_ms()))
    return found


def hand_back_all(proc: TaskProcessor, attempts: Iterable[Attempt], why: str) -> int:
    """Each attempt back to pending uncharged and uncounted, fenced on its attempt (one already
    settled is left as it is); its payload to the front of its lane. How many landed."""
    outcome = Outcome.release(why, Reason.llm_outage)
    return sum(1 for a in attempts if proc.finish(a, outcome))
