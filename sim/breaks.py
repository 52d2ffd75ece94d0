"""Safety mechanisms of the product, broken on purpose (``--break NAME``).

A harness that still reports zero violations with one of these in place proves nothing; each
must make it report one (``tests/sim/test_breaks.py``). They replace or wrap a real adapter;
the domain services and everything else stay as they are.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update

from docllm.adapters.redis_queue import RedisTaskQueue
from docllm.adapters.sql_repository import SqlAlchemyTaskRepository
from docllm.adapters.sql_schema import task_doc_llm as t
from docllm.adapters.sql_time import utcnow
from docllm.domain.model import TaskStatus
from docllm.domain.services.outcome import Outcome
from docllm.domain.usage import Usage
from docllm.domain.verdict import Facts
from docllm.runtime.running import Running
from docllm.runtime.worker import Worker


class AckAnyTokenQueue(RedisTaskQueue):
    """``ack`` without the token check: it ends every lease of the payload's task, as the
    original note's ``LREM processing 1 raw`` removes whichever copy it finds."""

    def ack(self, token: str) -> bool:
        data = self._client.hget(self.keys.leases, token)
        if data is None:
            return super().ack(token)
        task_id = json.loads(data).get("task_id")
        done = False
        for other, lease in self._client.hgetall(self.keys.leases).items():
            if json.loads(lease).get("task_id") == task_id:
                done = super().ack(other.decode()) or done
        return done


class NoStepReportQueue(RedisTaskQueue):
    """Steps of the authority's clock go unreported: no quiet windows (DESIGN section 6)."""

    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        return None


class NoClampQueue(RedisTaskQueue):
    """Deadlines are taken as written: a backward step of the Redis server's clock leaves a crashed
    worker's lease (and every delayed retry) an hour in the future."""

    def clamp(self, lease_ms: int, max_delay_ms: int, limit: int) -> int:
        return 0


class UnfencedCommitRepository(SqlAlchemyTaskRepository):
    """``commit`` conditional on the status only, not on the attempt (no fencing token)."""

    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.status == TaskStatus.processing.value)
            .values(
                status=TaskStatus.success.value, result=result, error=None, finished_at=utcnow(), updated_at=utcnow()
            )
        )
        return self._write(stmt, task_id, lambda row: row is not None and row.status == TaskStatus.success)


class NoCancelWorker(Worker):
    """An abandoned attempt's review is left running (threads cannot be cancelled): its LLM call
    goes on after the attempt was given up (I11)."""

    def _abandon(self, run: Running, verdict: Outcome | None) -> None:
        review, run.review = run.review, None
        super()._abandon(run, verdict)
        run.review = review


class NoHeartbeatWorker(Worker):
    """No lease is ever renewed: a review longer than the lease is reclaimed under its live worker."""

    async def _heartbeats(self) -> None:
        await asyncio.get_running_loop().create_future()


class NoCancelReadWorker(Worker):
    """Heartbeats never read the operator's cancel marks: a cancelled running task runs on and
    commits (C1)."""

    async def _cancels(self, runs: list[Running]) -> None:
        return None


class GrantAllLimiter:
    """The fleet's rate limiter that grants every request and hears no Retry-After."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def acquire(self, tokens: int) -> float:
        return 0.0

    def settle(self, delta_tokens: int, hints: Any) -> None:
        pass

    def headroom(self) -> dict[str, Any]:
        return {}


class NoHandBackWorker(Worker):
    """A review that failed for a provider reason is always charged: the breaker still counts it
    and still stops claims, but the attempts in flight when the provider went down are charged
    (retry_count + 1), and fail once the outage outlasts their budget (I9)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        judge = self.gate.judge

        async def charged(facts: Facts) -> Facts:
            await judge(facts)  # the breaker and this host's claims as usual
            return facts.judged(breaker_open=False, served_since=False, host_ok=None)  # no evidence: charged

        self.gate.judge = charged  # type: ignore[method-assign]


@dataclass(frozen=True)
class Break:
    name: str
    about: str
    shows_in: str  # a scenario where it shows
    queue_class: type | None = None
    reaper_clock: Callable[[Any, Any], Any] | None = None
    repo_class: type | None = None
    worker_class: type[Worker] | None = None
    limiter_class: type | None = None

    def wrap_repo(self, repo: SqlAlchemyTaskRepository) -> Any:
        if self.repo_class is None:
            return repo
        return self.repo_class(repo._engine, default_max_attempts=repo._default_max_attempts)

    def retry_policy(self, policy: Any) -> Any:
        return policy


BREAKS = {
    b.name: b
    for b in (
        Break(
            "ack-any-token", "ack ends every lease of the task, whatever the token", "d9", queue_class=AckAnyTokenQueue
        ),
        Break(
            "unfenced-commit",
            "commit checks the status but not the attempt (fencing token)",
            "d5",
            repo_class=UnfencedCommitRepository,
        ),
        Break(
            "no-clamp", "deadlines a backward clock step pushed out are left there", "skew", queue_class=NoClampQueue
        ),
        Break(
            "no-step-report",
            "a step of the clock is not reported: reapers reclaim across it",
            "skew",
            queue_class=NoStepReportQueue,
        ),
        Break("no-cancel", "an abandoned attempt's LLM call is not cancelled", "d5", worker_class=NoCancelWorker),
        Break("no-heartbeat", "the worker never renews a lease", "d9", worker_class=NoHeartbeatWorker),
        Break(
            "no-cancel-read",
            "heartbeats do not read the operator's cancel marks",
            "cancel",
            worker_class=NoCancelReadWorker,
        ),
        Break(
            "no-hand-back",
            "an attempt failed by an LLM outage is charged instead of handed back",
            "outage",
            worker_class=NoHandBackWorker,
        ),
        Break(
            "reaper-client-clock",
            "the reaper decides expiry with its own host's (skewed) clock",
            "skew",
            reaper_clock=lambda system, actor: system.wall_clock(actor.name),
        ),
        Break(
            "no-rate-limit", "the fleet's rate limiter grants every request", "limits", limiter_class=GrantAllLimiter
        ),
    )
}


def get(name: str | None) -> Break | None:
    if name is None:
        return None
    if name not in BREAKS:
        raise KeyError(f"unknown break {name!r}; one of {', '.join(BREAKS)}")
    return BREAKS[name]
