"""Every hand-back of the batch lane is bounded (issue 43, docs/BATCHES.md).

A batch that ends without its members' answers (the provider failed it, e.g. over the
organisation's enqueued-token limit with ``token_limit_exceeded``; it expired; its files were
lost; it outlived its window) hands its members back uncharged, *counted* towards
DOCLLM_MAX_HANDBACKS like every hand-back the LLM boundary is blamed for (I12). Without the count
a provider that fails every batch handed the same tasks back forever.

- ``realtime_after(max_handbacks)`` counted hand-backs: the task leaves the batch lane. The batcher
  that claims it hands its attempt back uncounted with its payload in the default lane, so the
  realtime workers review it (``to_realtime``); realtime keeps the rest of the bound.
- A batch's end that would count a task past DOCLLM_MAX_HANDBACKS fails it with an error that
  says why (``returned``), rather than handing it back once more.
"""

from __future__ import annotations

from collections.abc import Iterable

from docllm.domain import events as ev
from docllm.domain.lanes.model import DEFAULT_LANE
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt
from docllm.domain.tasks.outcome import Outcome, Reason
from docllm.domain.tasks.payload import make_payload


def realtime_after(max_handbacks: int) -> int:
    """Counted hand-backs after which a bulk task is reviewed realtime: half the bound (rounded up,
    at least one), so realtime has the other half before the verdict charges it."""
    return max(1, (max_handbacks + 1) // 2)


def returned(attempt: Attempt, why: str, max_handbacks: int) -> Outcome:
    """A member a batch's end returns: handed back, counted; past the bound, failed saying why."""
    n = attempt.task.handbacks
    if n >= max_handbacks:
        return Outcome.permanent(
            f"{why}; handed back {n} times already (DOCLLM_MAX_HANDBACKS={max_handbacks}), so failed rather "
            "than sent again",
            Reason.handbacks_exhausted,
        )
    return Outcome.release(
        f"{why}; handed back uncharged ({n + 1}/{max_handbacks})", Reason.batch_returned, counted=True
    )


def return_all(proc: TaskProcessor, attempts: Iterable[Attempt], why: str) -> int:
    """``returned`` for each member still on its attempt (fenced); how many landed."""
    return sum(1 for a in attempts if proc.finish(a, returned(a, why, proc.retry.max_handbacks)))


def leaving(proc: TaskProcessor, attempts: list[Attempt]) -> tuple[list[Attempt], list[Attempt]]:
    """(those a batch may take, those past ``realtime_after`` that go realtime)."""
    bound = realtime_after(proc.retry.max_handbacks)
    return [a for a in attempts if a.task.handbacks < bound], [a for a in attempts if a.task.handbacks >= bound]


def to_realtime(proc: TaskProcessor, attempt: Attempt) -> bool:
    """Hand the attempt back uncounted (fenced) and queue the task in the default lane, where the
    realtime workers claim it; its row keeps its lane. The push comes before the ack: a crash in
    between leaves a second delivery, which the fenced start turns away (never a lost one)."""
    t = attempt.task
    why = (
        f"handed back {t.handbacks} times by batches that ended without its answer: reviewed realtime from now on "
        f"(DOCLLM_MAX_HANDBACKS={proc.retry.max_handbacks})"
    )
    if not proc.repo.hand_back(t.task_id, attempt.number, why, attempt.usage, False):
        return False  # settled by someone else; its lease is the reaper's
    proc.queue.push(make_payload(t.task_id, t.task_name, DEFAULT_LANE, t.tenant, t.traceparent), front=True)
    proc.queue.ack(attempt.token)
    proc.events.emit(
        ev.RELEASED,
        task_id=t.task_id,
        attempt=attempt.number,
        reason=Reason.to_realtime,
        error=why,
        delay_s=0.0,
        worker=proc.worker_id,
    )
    return True
