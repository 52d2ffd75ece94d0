"""Safety mechanisms of the product, broken on purpose (``--break NAME``).

A harness that still reports zero violations with one of these in place proves nothing; each
must make it report one (``tests/sim/test_breaks.py``). They wrap a real dependency (an adapter,
the TaskProcessor, the LLM gate) through its public interface, or override a public method of an
adapter; the runtime itself runs as shipped.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.errors import BadPayload
from docllm.domain.llm.budget import Grant
from docllm.domain.llm.rate_limits import MAX_COUNT, MAX_RETRY_AFTER_S, ProviderHints
from docllm.domain.llm.usage import Usage, UsageMeter
from docllm.domain.tasks.model import Attempt, TaskStatus, WriteKind
from docllm.domain.tasks.payload import parse_payload
from docllm.domain.tasks.verdict import Facts


class AckAnyTokenQueue(RedisTaskQueue):
    """``ack`` without the token check: it ends every lease of the payload's task, as the
    original note's ``LREM processing 1 raw`` removes whichever copy it finds (a group of acks,
    ``ack_many``, the same for each token)."""

    def ack(self, token: str) -> bool:
        return self.ack_many([token])[0]

    def ack_many(self, tokens: list[str]) -> list[bool]:
        return [self._ack_any(token) for token in tokens]

    def _ack_any(self, token: str) -> bool:
        leases = self.in_flight(100_000)
        mine = [d for d in leases if d.token == token]
        if not mine:
            return super().ack_many([token])[0]
        task_id = task_id_of(mine[0].raw)
        done = False
        for other in leases:
            if task_id_of(other.raw) == task_id:
                done = super().ack_many([other.token])[0] or done
        return done


def task_id_of(raw: str) -> int | None:
    try:
        return parse_payload(raw, max_bytes=1 << 30).task_id
    except BadPayload:
        return None


class NoStepReportQueue(RedisTaskQueue):
    """Steps of the authority's clock go unreported: no quiet windows (DESIGN section 6)."""

    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        return None


class NoClampQueue(RedisTaskQueue):
    """Deadlines are taken as written: a backward step of the Redis server's clock leaves a crashed
    worker's lease (and every delayed retry) an hour in the future."""

    def clamp(self, lease_ms: int, max_delay_ms: int, limit: int) -> int:
        return 0


class UnfencedCommits:
    """``commit`` conditional on the status only, not on the attempt (no fencing token): it
    commits under whatever attempt the row holds now."""

    def __init__(self, repo: Any):
        self._repo = repo

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._repo, attr)

    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        row = self._repo.get(task_id)
        if row is None or row.status is not TaskStatus.processing:
            return False
        return bool(self._repo.commit(task_id, row.attempt, result, usage))

    def write_group(self, writes: Any, starts: Any = ()) -> Any:
        """The same commits in a group: each under the attempt its row holds now."""
        unfenced = []
        for write in writes:
            row = self._repo.get(write.task_id) if write.kind is WriteKind.commit else None
            if row is not None and row.status is TaskStatus.processing:
                write = replace(write, attempt=row.attempt)
            unfenced.append(write)
        return self._repo.write_group(unfenced, starts)


class ProcessorWrapper:
    """A TaskProcessor with one step changed; everything else is the real one's."""

    def __init__(self, proc: Any):
        self._proc = proc

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._proc, attr)


class UncancelledReviews(ProcessorWrapper):
    """An abandoned attempt's review is left running (threads cannot be cancelled): the worker
    cancels a shield, and the LLM call behind it goes on after the attempt was given up (I11)."""

    async def observe(self, attempt: Any) -> Any:
        here = asyncio.current_task()
        name = here.get_name() if here is not None else None  # the simulated LLM knows the attempt by it
        inner = asyncio.get_running_loop().create_task(self._proc.observe(attempt), name=name)
        return await asyncio.shield(inner)


class NoRenewals(ProcessorWrapper):
    """No lease is ever renewed, though the worker is told it was: a review longer than the lease
    is reclaimed under its live worker (I8)."""

    def heartbeat_many(self, attempts: list[Any]) -> list[bool]:
        return [True] * len(attempts)


class NoCancelReads(ProcessorWrapper):
    """Heartbeats never see the operator's cancel marks: a cancelled running task runs on and
    commits (C1)."""

    def cancelled(self, attempts: list[Any]) -> set[int]:
        return set()


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


class ChargingGate:
    """A review that failed for a provider reason is always charged: the breaker still counts it
    and still stops claims, but the attempts in flight when the provider went down are charged
    (retry_count + 1), and fail once the outage outlasts their budget (I9)."""

    def __init__(self, gate: Any):
        self._gate = gate

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._gate, attr)

    async def judge(self, facts: Facts) -> Facts:
        await self._gate.judge(facts)  # the breaker and this host's claims as usual
        return facts.judged(breaker_open=False, served_since=False, host_ok=None)  # no evidence: charged


class ProcessorWithMeter(ProcessorWrapper):
    """A TaskProcessor whose attempts carry ``meter(attempt.meter)`` instead of their own meter."""

    def __init__(self, proc: Any, meter: Callable[[UsageMeter], Any]):
        super().__init__(proc)
        self._meter = meter

    def begin_batch(self, deliveries: Any) -> Any:
        begun = self._proc.begin_batch(deliveries)
        for attempt in begun:
            if isinstance(attempt, Attempt):
                attempt.meter = self._meter(attempt.meter)
        return begun


class UnheldMeter:
    """An attempt's meter that says its requests never waited: waits on the fleet's limits or a
    provider's hold count against PROCESSING_TIMEOUT_SECONDS (I12)."""

    def __init__(self, meter: UsageMeter):
        self._meter = meter

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._meter, attr)

    def waited(self, now: float) -> float:
        return 0.0


class NoHostCheckGate:
    """The LLM gate's verdict without this host's own check (``host_ok`` None): a failure only
    this host sees (it is cut off while others are served) is charged to the document (I9)."""

    def __init__(self, gate: Any):
        self._gate = gate

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._gate, attr)

    async def judge(self, facts: Facts) -> Facts:
        judged = await self._gate.judge(facts)
        return judged.judged(breaker_open=judged.breaker_open, served_since=judged.served_since, host_ok=None)


def unbounded_hints(headers: Any) -> ProviderHints:
    """The provider's headers read without bounds: whatever ``float()`` makes of them (inf, nan,
    1e20) is believed."""

    def number(name: str) -> float | None:
        try:
            return float(headers[name]) if name in headers else None
        except ValueError:
            return None

    def count(name: str) -> int | None:
        value = number(name)
        return value if value is None or not math.isfinite(value) else int(value)  # type: ignore[return-value]

    retry_after = number("retry-after")
    if retry_after is None and number("retry-after-ms") is not None:
        retry_after = number("retry-after-ms") / 1000  # type: ignore[operator]
    return ProviderHints(
        remaining_requests=count("x-ratelimit-remaining-requests"),
        remaining_tokens=count("x-ratelimit-remaining-tokens"),
        reset_requests_s=number("x-ratelimit-reset-requests"),
        reset_tokens_s=number("x-ratelimit-reset-tokens"),
        retry_after_s=retry_after,
        limit_requests=count("x-ratelimit-limit-requests"),
        limit_tokens=count("x-ratelimit-limit-tokens"),
    )


class BelievingLimiter:
    """The fleet's limiter as it was before issue 22 item 4, over the real one: a provider's number
    beyond the bounds is stored as said (the unchecked script stored ``hold=inf``, its key lost its
    TTL), and from then on every wait it names overflows Redis's integer reply into one read as "go
    now" (the pre-fix RateGate's reading of it): every request is granted, for good."""

    def __init__(self, limiter: Any):
        self._limiter, self.broken = limiter, False

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._limiter, attr)

    def acquire(self, tokens: int) -> float:
        return 0.0 if self.broken else self._limiter.acquire(tokens)

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        numbers = [v for v in vars(hints).values() if v is not None] + [delta_tokens]
        if any(not math.isfinite(v) or abs(v) > MAX_COUNT for v in numbers) or (
            hints.retry_after_s is not None and hints.retry_after_s > MAX_RETRY_AFTER_S
        ):
            self.broken = True
        self._limiter.settle(delta_tokens, hints)


class SilentRegistry:
    """The worker registry that drops every beat: live workers are missing from ``docllm workers``."""

    def __init__(self, registry: Any):
        self._registry = registry

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._registry, attr)

    def beat(self, record: Any, ttl_ms: int) -> None:
        return None


class FailingPauseGate:
    """An LLM gate whose ``pause`` raises a bug after a while: the worker's dispatcher dies and the
    process runs on without claiming (its /healthz must say so)."""

    def __init__(self, gate: Any):
        self._gate, self._calls = gate, 0

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._gate, attr)

    async def pause(self) -> float:
        self._calls += 1
        if self._calls > 3:
            raise RuntimeError("a bug in the LLM gate")
        return float(await self._gate.pause())


class UnheldReservations:
    """The spend ledger's Redis side granting every reservation (of the keys ``which`` picks)
    without holding anything or looking at a cap: spend is only counted after the fact (I16)."""

    def __init__(self, budget: Any, which: Callable[[str], bool] = lambda key: True):
        self._budget, self._which = budget, which

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._budget, attr)

    def reserve(self, key: str, deployment: str, micro_usd: int, hold_ms: int, deployment_cap: Any) -> Grant:
        if not self._which(key):
            return self._budget.reserve(key, deployment, micro_usd, hold_ms, deployment_cap)  # type: ignore[no-any-return]
        return Grant(True, "", self._budget.view())


class RowSaysLanded:
    """A refused write read as landed whenever the row shows the same status at the same attempt
    (the rule before issue 43): a second poller's commit of one batch is counted as its own, and
    its spend counted twice."""

    def __init__(self, repo: Any):
        self._repo = repo

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._repo, attr)

    def write_group(self, writes: Any, starts: Any = ()) -> Any:
        done = self._repo.write_group(writes, starts)
        written = list(done.written)
        for i, (write, ok) in enumerate(zip(writes, written, strict=True)):
            row = None if ok else self._repo.get(write.task_id)
            if row is not None and row.attempt == write.attempt and row.status is write.status:
                written[i] = True
        return replace(done, written=written)


@dataclass(frozen=True)
class Break:
    name: str
    about: str
    shows_in: str  # a scenario where it shows
    queue_class: type | None = None
    reaper_clock: Callable[[Any, Any], Any] | None = None
    repo_wrapper: Callable[[Any], Any] | None = None  # around the SQL repository
    limiter_class: type | None = None
    limiter_wrapper: Callable[[Any], Any] | None = None  # around the fleet's real limiter
    hints_parser: Callable[[Any], ProviderHints] | None = None  # the SimLLM reads headers with it
    processor_wrapper: Callable[[Any], Any] | None = None  # around each worker's TaskProcessor
    gate_wrapper: Callable[[Any], Any] | None = None  # around each worker's LlmGate
    retry_changes: dict[str, Any] | None = None  # the RetryPolicy's numbers changed
    registry_wrapper: Callable[[Any], Any] | None = None  # around the worker registry
    budget_wrapper: Callable[[Any], Any] | None = None  # around the spend ledger's Redis side

    def wrap_budget(self, budget: Any) -> Any:
        return self.budget_wrapper(budget) if self.budget_wrapper else budget

    def wrap_registry(self, registry: Any) -> Any:
        return self.registry_wrapper(registry) if self.registry_wrapper else registry

    def wrap_repo(self, repo: Any) -> Any:
        return self.repo_wrapper(repo) if self.repo_wrapper else repo

    def retry_policy(self, policy: Any) -> Any:
        return replace(policy, **self.retry_changes) if self.retry_changes else policy

    def wrap_limiter(self, limiter: Any) -> Any:
        return self.limiter_wrapper(limiter) if self.limiter_wrapper else limiter

    def wrap_processor(self, proc: Any) -> Any:
        return self.processor_wrapper(proc) if self.processor_wrapper else proc

    def wrap_gate(self, gate: Any) -> Any:
        return self.gate_wrapper(gate) if self.gate_wrapper else gate


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
            repo_wrapper=UnfencedCommits,
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
        Break(
            "no-cancel", "an abandoned attempt's LLM call is not cancelled", "d5", processor_wrapper=UncancelledReviews
        ),
        Break("no-heartbeat", "the worker never renews a lease", "d9", processor_wrapper=NoRenewals),
        Break(
            "no-cancel-read",
            "heartbeats do not read the operator's cancel marks",
            "cancel",
            processor_wrapper=NoCancelReads,
        ),
        Break(
            "no-hand-back",
            "an attempt failed by an LLM outage is charged instead of handed back",
            "outage",
            gate_wrapper=ChargingGate,
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
        Break(
            "no-handback-bound",
            "hand-backs while the provider serves are never charged (no DOCLLM_MAX_HANDBACKS): a poison "
            "batch that opens the breaker loops",
            "blame",
            retry_changes={"max_handbacks": 10**9},
        ),
        Break(
            "no-host-check",
            "the LLM gate's verdict ignores this host's own check: a cut-off host's failures are charged",
            "blame",
            gate_wrapper=NoHostCheckGate,
        ),
        Break(
            "waits-count",
            "waits on the fleet's limits and provider holds count against PROCESSING_TIMEOUT_SECONDS",
            "blame",
            processor_wrapper=lambda proc: ProcessorWithMeter(proc, UnheldMeter),
        ),
        Break(
            "believe-hints",
            "a provider's numbers are believed unbounded (headers, stored limits): one garbage "
            "Retry-After turns the fleet's rate limit off",
            "limits",
            limiter_wrapper=BelievingLimiter,
            hints_parser=unbounded_hints,
        ),
        Break("no-presence", "workers never beat the registry", "d1", registry_wrapper=SilentRegistry),
        Break(
            "no-reservation",
            "the spend ledger grants every reservation without a cap: spend is counted only after the fact",
            "money",
            budget_wrapper=UnheldReservations,
        ),
        Break(
            "unheld-batches",
            "a batch is created without reserving its lines' estimate (spend added at apply, as before)",
            "money",
            budget_wrapper=lambda budget: UnheldReservations(budget, lambda key: key.startswith("batch:")),
        ),
        Break(
            "landed-from-row",
            "a refused commit is read as landed when the row is success at the same attempt: two pollers "
            "applying one batch count its spend twice",
            "money",
            repo_wrapper=RowSaysLanded,
        ),
        Break(
            "dead-dispatcher",
            "a bug kills a worker's dispatcher; the process runs on, its health check must tell",
            "d1",
            gate_wrapper=FailingPauseGate,
        ),
    )
}


def get(name: str | None) -> Break | None:
    if name is None:
        return None
    if name not in BREAKS:
        raise KeyError(f"unknown break {name!r}; one of {', '.join(BREAKS)}")
    return BREAKS[name]
