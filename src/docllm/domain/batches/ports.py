"""The ports of the batch lane: its durable record, its leases, the provider's Batch API.

Every time in these signatures is the authority's time (the Redis server's clock, ARCHITECTURE.md,
Clocks) in milliseconds; no port takes or returns a worker's wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from docllm.domain.batches.model import Batch, BatchCount, BatchMember, BatchState, ProviderBatch


class BatchStore(Protocol):
    """The durable record of provider batches (issue 28; MySQL, beside the tasks): written before
    the provider is asked anything, so no batch it holds is forgotten (domain/batches/model.py)."""

    def open(
        self,
        ref: str,
        deployment: str,
        members: Iterable[BatchMember | tuple[int, int]],
        now_ms: int,
        max_chunk_chars: int | None = None,
    ) -> Batch:
        """Record a new batch, state ``open``, with one member per (task_id, attempt), at authority
        time ``now_ms``, and the chunking its lines were split with. ``ref``: a fresh id the caller
        made (uuid4 hex); ValueError if it is taken."""

    def advance(
        self,
        ref: str,
        from_state: BatchState,
        to_state: BatchState,
        now_ms: int,
        *,
        batch_id: str | None = None,
        input_file_id: str | None = None,
        output_file_id: str | None = None,
        error_file_id: str | None = None,
        provider_status: str | None = None,
        cost_usd: float | None = None,
        error: str | None = None,
    ) -> bool:
        """Compare-and-set: move the batch to ``to_state`` and record the fields given (None
        leaves one as it is) only while it is in ``from_state``; False when it is not (a racing
        poller moved it first), so of two moves from one state exactly one lands. A move to the
        same state records fields only (and lets every racer land). ValueError for a move
        ``batches.can_move`` refuses."""

    def get(self, ref: str) -> Batch | None:
        """The batch with its members."""

    def unfinished(self, limit: int = 100) -> list[Batch]:
        """Batches not in a terminal state, oldest first, without members (``get`` one under its
        lease for them): what pollers pick from."""

    def of_task(self, task_id: int) -> list[str]:
        """The refs of the batches holding the task (any attempt), newest first: ``show``, ``cancel``."""

    def recent(self, limit: int = 50) -> list[Batch]:
        """The newest batches, without members: ``stats`` and the dashboard."""

    def counts(self) -> dict[BatchState, BatchCount]:
        """Every state (none left out, zeros included) with its batches and their tasks, over all
        batches: ``stats``, the dashboard and the metrics."""


class BatchLeases(Protocol):
    """Who polls a batch (issue 28): one holder at a time per batch, token-fenced, on the authority
    clock, like a task's lease; a poller that dies is replaced once its lease runs out."""

    def acquire(self, ref: str, owner: str, ttl_ms: int) -> str | None:
        """A new token holding the batch's lease for ``ttl_ms``, or None while another holds it."""

    def renew(self, ref: str, token: str, ttl_ms: int) -> bool:
        """Hold it ``ttl_ms`` more; False when ``token`` no longer holds it (expired, or taken since)."""

    def release(self, ref: str, token: str) -> bool:
        """Give it up; False (and nothing changes) when the lease is not ``token``'s (taken since, or gone)."""

    def renew_tasks(self, tokens: list[str], lease_ms: int) -> list[bool]:
        """Renew the member tasks' leases (their lease tokens) in one round trip: the queue's own
        renewal (``Leases.extend_many``), with its rules; one bool per token, in order."""


class BatchApi(Protocol):
    """The provider's Files and Batch APIs (issue 28). Errors are the domain's: ProviderUnavailable
    (no answer, 429, 5xx), ConfigurationError (401/403), PermanentError (a request it refuses),
    BatchFileLost (a file it no longer has)."""

    def upload(self, jsonl: bytes, name: str) -> str:
        """Upload a batch's input file (``purpose="batch"``); its file id."""

    def create(self, input_file_id: str, ref: str) -> ProviderBatch:
        """Create the batch (24 h window, chat completions), ``ref`` in its metadata as docllm_ref."""

    def retrieve(self, batch_id: str) -> ProviderBatch: ...

    def find(self, ref: str) -> ProviderBatch | None:
        """The provider's batch whose metadata docllm_ref is ``ref`` (adoption), or None."""

    def cancel(self, batch_id: str) -> None: ...

    def content(self, file_id: str) -> list[str]:
        """A result file's lines; BatchFileLost when the provider no longer has it."""
