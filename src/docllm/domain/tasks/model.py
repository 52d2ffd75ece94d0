"""Task statuses, the moves between them, and the value objects the ports exchange."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from docllm.domain.llm.usage import Usage, UsageMeter
from docllm.domain.tracing import NULL_SPAN, Span


class TaskStatus(str, enum.Enum):  # noqa: UP042 - StrEnum would change str() of a status (logs, messages)
    pending = "pending"
    processing = "processing"
    success = "success"
    failed = "failed"

    @property
    def terminal(self) -> bool:
        return self in (TaskStatus.success, TaskStatus.failed)


# The moves (ARCHITECTURE.md, Task lifecycle): pending -> processing (start_attempt), processing -> success |
# pending | failed (commit, retry, fail), failed -> pending (the operator's retry, nothing else).
# Each is one conditional write of the repository, fenced on the attempt; the contract tests
# (tests/contract/test_task_repository_contract.py) hold both adapters to them.


@dataclass(frozen=True)
class Task:
    """One row of ``task_doc_llm`` as the domain sees it.

    ``attempt`` is the fencing token: it grows by one at every start of an attempt and never
    goes back, so every later write of that attempt can be made conditional on it.
    ``retry_count`` counts failed attempts in the current budget (an operator's retry resets it).
    """

    task_id: int
    task_name: str
    status: TaskStatus
    attempt: int = 0
    retry_count: int = 0
    handbacks: int = 0  # uncharged hand-backs that count towards DOCLLM_MAX_HANDBACKS (I12)
    max_attempts: int | None = None
    lease_token: str | None = None
    document: str | None = None
    result: dict[str, Any] | Any = None  # a report; rows of the original deployment: any JSON or text
    error: str | None = None
    processing_started_at: datetime | None = None
    finished_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    usage: Usage | None = None  # the LLM's, summed over the attempts that wrote an outcome; None: none
    rubric: str | None = None  # the name of the rubric its review follows (domain/review/rubric.py); None: none
    priority: str | None = None  # its lane (domain/lanes/model.py, migration 0006); None: the default lane
    tenant: str | None = None  # who submitted it, for per-tenant fairness; None: no tenant
    traceparent: str | None = None  # the trace its submit started (W3C); the reconciler's re-queue continues it

    def budget(self, default_max_attempts: int) -> int:
        return self.max_attempts or default_max_attempts

    def attempts_in_budget(self) -> int:
        """Attempts started in the current budget, the running one included (if processing)."""
        return self.retry_count + (1 if self.status == TaskStatus.processing else 0)

    def last_attempt(self, default_max_attempts: int) -> bool:
        """True when the running attempt is the last one the budget allows."""
        return self.retry_count + 1 >= self.budget(default_max_attempts)


@dataclass(frozen=True)
class TaskRef:
    """What a queue payload names: ``{"task_id": 1, "task_name": "..."}``."""

    task_id: int
    task_name: str | None = None
    priority: str | None = None  # its lane (domain/lanes/model.py); None: the default lane
    tenant: str | None = None  # None: no tenant
    traceparent: str | None = None  # the task's trace (W3C), when its producer traced it


@dataclass(frozen=True)
class Delivery:
    """A payload leased to one worker: the raw payload as it sat in the queue, and its lease."""

    raw: str
    token: str
    deadline_ms: int
    worker_id: str = ""
    claimed_at_ms: int = 0
    cancelled: bool = False  # its task carried an operator's cancel mark when it was claimed


@dataclass(frozen=True)
class DeadLetter:
    """A payload given up on, with why."""

    raw: str
    reason: str
    at_ms: int
    task_id: int | None = None


@dataclass(frozen=True)
class QueueStats:
    ready: int = 0
    processing: int = 0
    delayed: int = 0
    dead: int = 0
    oldest_claimed_at_ms: int | None = None


@dataclass(frozen=True)
class Leftovers:
    """What the original note's workers leave in Redis (ARCHITECTURE.md, Switching over): they claim with
    ``BRPOPLPUSH ready processing`` and ``HSET processing_ts``, without a lease.

    ``payloads``: entries of the processing list that no lease holds, one per extra copy.
    ``stamps``: ``(task_id, value)`` of processing_ts entries whose task no lease names.
    """

    payloads: tuple[str, ...] = ()
    stamps: tuple[tuple[int, str], ...] = ()


class StartResult(enum.Enum):
    """What ``TaskRepository.start_attempt`` found."""

    started = "started"
    missing = "missing"
    terminal = "terminal"
    busy = "busy"  # processing under another attempt's token


@dataclass(frozen=True)
class StartOutcome:
    result: StartResult
    task: Task | None = None

    @classmethod
    def found(cls, task: Task, token: str) -> StartOutcome:
        """What a start found on a row that is not pending (every repository decides alike)."""
        if task.status.terminal:
            return cls(StartResult.terminal, task)
        if task.lease_token == token:  # our own start landed earlier and its answer was lost
            return cls(StartResult.started, task)
        return cls(StartResult.busy, task)


class WriteKind(enum.Enum):
    """The fenced end-of-attempt writes (``TaskStore``: commit, retry, hand_back, fail)."""

    commit = "commit"
    retry = "retry"
    hand_back = "hand_back"
    fail = "fail"


WRITTEN_STATUS = {
    WriteKind.commit: TaskStatus.success,
    WriteKind.retry: TaskStatus.pending,
    WriteKind.hand_back: TaskStatus.pending,
    WriteKind.fail: TaskStatus.failed,
}


@dataclass(frozen=True)
class FencedWrite:
    """One fenced end-of-attempt write: processing -> ``status`` for ``attempt`` only, with the
    attempt's LLM usage added to the row's in the same write. ``result``: the report (commit);
    ``error``: the reason (retry, hand_back, fail). Counters: retry and fail charge one attempt
    (retry_count + 1); a ``counted`` hand_back is one more of the task's bounded hand-backs."""

    kind: WriteKind
    task_id: int
    attempt: int
    result: dict[str, Any] | None = None
    error: str | None = None
    usage: Usage | None = None
    counted: bool = False

    @property
    def status(self) -> TaskStatus:
        return WRITTEN_STATUS[self.kind]

    @property
    def charged(self) -> int:
        return 1 if self.kind in (WriteKind.retry, WriteKind.fail) else 0

    @property
    def handbacks(self) -> int:
        return 1 if self.kind is WriteKind.hand_back and self.counted else 0


@dataclass(frozen=True)
class StartRequest:
    """pending -> processing for a delivery: attempt + 1, lease_token = ``token``."""

    task_id: int
    token: str


@dataclass(frozen=True)
class GroupOutcome:
    """What one group did: per write, whether it landed now; per start, what it found."""

    written: list[bool]
    started: list[StartOutcome]


@dataclass
class Attempt:
    """A started attempt: the delivery that carried it and the row as the start left it."""

    delivery: Delivery
    task: Task
    started_ms: int
    meta: dict[str, Any] = field(default_factory=dict)
    meter: UsageMeter = field(default_factory=UsageMeter)  # this attempt's LLM calls so far
    span: Span = field(default=NULL_SPAN, repr=False, compare=False)  # its span in the task's trace
    hold: str | None = None  # the spend ledger's key its spend is reserved under (I16); None: none
    hold_release: bool = True  # its end releases the hold (a batch member's only draws on its batch's)
    hold_at: str | None = None  # the deployment ``hold`` is at (a routed chunk sent elsewhere reserves there)
    chunk_holds: list[str] = field(default_factory=list)  # those chunk reservations' keys

    @property
    def usage(self) -> Usage:
        return self.meter.total

    @property
    def task_id(self) -> int:
        return self.task.task_id

    @property
    def number(self) -> int:
        return self.task.attempt

    @property
    def token(self) -> str:
        return self.delivery.token
