"""A provider batch of bulk tasks as docllm records it (issue 28, docs: the batch lane), and its states.

The record is written before anything is asked of the provider (``open``), so a batch the provider
holds is never forgotten: a batcher killed mid-way leaves a row that the next poller adopts.

    open -> uploaded -> submitted -> applied
    open -> submitted                      (adoption: the provider's batch found by its docllm_ref)
    open | uploaded | submitted -> returned

``applied`` (its results written) and ``returned`` (its members handed back uncharged) are terminal.
A move from a state to itself records fields (the provider's status as a poller saw it) and keeps
the state. Times are the authority's (the Redis server's clock), as every deadline of a batch is.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime


class BatchState(str, enum.Enum):  # noqa: UP042 - as TaskStatus (StrEnum would change str())
    open = "open"  # recorded with its members; nothing sent to the provider yet
    uploaded = "uploaded"  # its input file is at the provider (input_file_id)
    submitted = "submitted"  # the provider's batch exists (batch_id); pollers watch it
    applied = "applied"  # its results were written to the tasks (terminal)
    returned = "returned"  # its members were handed back uncharged (terminal)

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({BatchState.applied, BatchState.returned})
_MOVES = {
    BatchState.open: {BatchState.uploaded, BatchState.submitted, BatchState.returned},
    BatchState.uploaded: {BatchState.submitted, BatchState.returned},
    BatchState.submitted: {BatchState.applied, BatchState.returned},
}


def can_move(from_state: BatchState, to_state: BatchState) -> bool:
    """Whether a batch may go from ``from_state`` to ``to_state``; a terminal state goes nowhere,
    not even to itself (its row no longer changes)."""
    if from_state.terminal:
        return False
    return to_state == from_state or to_state in _MOVES[from_state]


def check_move(from_state: BatchState, to_state: BatchState) -> None:
    """Raise ValueError for a move ``can_move`` refuses: a caller's bug, not a race."""
    if not can_move(from_state, to_state):
        raise ValueError(f"a batch cannot go from {from_state.value} to {to_state.value}")


@dataclass(frozen=True, order=True)
class BatchMember:
    """One task of a batch, on the attempt the batch runs: every write for it is fenced on that attempt."""

    task_id: int
    attempt: int


@dataclass(frozen=True)
class Batch:
    """One row of ``llm_batches``. ``members``: its tasks, in task id order; listings (``recent``,
    ``unfinished``) leave them out (empty) and give their number in ``tasks``."""

    ref: str  # docllm's id (uuid4 hex), in the provider batch's metadata as docllm_ref
    deployment: str
    state: BatchState
    tasks: int
    created_at: datetime
    updated_at: datetime
    members: tuple[BatchMember, ...] = ()
    batch_id: str | None = None  # the provider's
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    provider_status: str | None = None  # as last seen: validating, in_progress, completed, expired, ...
    cost_usd: float | None = None
    error: str | None = None
    # DOCLLM_LLM_MAX_CHUNK_CHARS its lines were split with: its results are placed by the same
    # split, whatever the setting is when they come back. None: recorded before it was kept.
    max_chunk_chars: int | None = None

    def age_ms(self, now_ms: int) -> int:
        """Authority milliseconds since it was opened (the adoption grace, the window's bound)."""
        return now_ms - ms_of(self.created_at)

    def idle_ms(self, now_ms: int) -> int:
        """Authority milliseconds since its row last changed."""
        return now_ms - ms_of(self.updated_at)


# The provider's batch statuses: still running, and the ends (OpenAI's names).
RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
COMPLETED = "completed"
GIVEN_UP = frozenset({"failed", "expired", "cancelled"})  # its members are handed back uncharged


@dataclass(frozen=True)
class ProviderBatch:
    """A batch as the provider reports it (``BatchApi``)."""

    id: str
    status: str
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    ref: str | None = None  # its metadata's docllm_ref
    error: str | None = None  # why the provider failed it (its first error: "token_limit_exceeded: ..."), if said


@dataclass(frozen=True)
class BatchCount:
    """How many batches are in one state, and how many tasks they hold (``BatchStore.counts``)."""

    batches: int = 0
    tasks: int = 0


def moment(now_ms: int) -> datetime:
    """Authority milliseconds as the aware UTC datetime a record keeps."""
    return datetime.fromtimestamp(now_ms / 1000, tz=UTC)


def ms_of(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def members_of(pairs: Iterable[BatchMember | tuple[int, int]]) -> tuple[BatchMember, ...]:
    """(task_id, attempt) pairs (or members) as sorted members; a task twice is a caller's bug."""
    members = tuple(sorted(p if isinstance(p, BatchMember) else BatchMember(int(p[0]), int(p[1])) for p in pairs))
    if len({m.task_id for m in members}) != len(members):
        raise ValueError("a batch holds each task once")
    return members
