"""The ports of tasks: the queue's roles (Redis), the source of truth (MySQL), the worker registry and
the dashboard's sessions.

Every time in these signatures is the authority's time (the Redis server's clock, ARCHITECTURE.md,
Clocks) in milliseconds; no port takes or returns a worker's wall clock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any, Protocol

from docllm.domain.lanes.ports import LaneViews
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import (
    DeadLetter,
    Delivery,
    FencedWrite,
    GroupOutcome,
    Leftovers,
    QueueStats,
    StartOutcome,
    StartRequest,
    Task,
    TaskStatus,
)
from docllm.domain.tasks.workers import WorkerRecord


class Clock(Protocol):
    """The authority clock: milliseconds of the Redis server's time."""

    def now_ms(self) -> int: ...


# -- the queue (Redis), one Protocol per role ------------------------------------------------------------
# Every method that names a token acts only while that token still holds its lease, so a late or
# repeated call is a harmless no-op (it returns False). ``TaskQueue`` combines the roles: the
# adapters implement it and the container hands it out; each consumer takes the roles it uses.


class Claims(Protocol):
    """Taking work: the ready list, the staging list and new leases."""

    def push(self, raw: str, front: bool = False) -> None:
        """Add a payload to ready (``front`` makes it the next one claimed)."""

    def claim(self, worker_id: str, lease_ms: int) -> Delivery | None:
        """Atomically move the next ready payload into processing under a new lease, or None.
        ``Delivery.cancelled`` says whether its task carried a cancel mark (``mark_cancelled``)."""

    def claim_batch(
        self, worker_id: str, lease_ms: int, limit: int, lanes: tuple[str, ...] | None = None
    ) -> list[Delivery]:
        """``claim`` up to ``limit`` times in one atomic step (one round trip), oldest first.
        ``lanes``: claim from these lanes only (the batch lane's batcher: ``("bulk",)``), its
        leases counted against no tenant cap (``LanePolicy.batching``); None: the lanes of the
        queue's policy (``LanePolicy.serves``)."""

    def stage(self, timeout_s: float) -> str | None:
        """Block until ready holds a payload (at most ``timeout_s``; 0: do not block) and move it
        to the staging list, where only this caller's ``lease_staged`` takes it. A crash in between
        leaves it staged; ``unstage`` puts it back in ready. One waiter per payload wakes."""

    def lease_staged(self, raw: str, worker_id: str, lease_ms: int) -> Delivery | None:
        """Move a staged payload into processing under a new lease; None when it is no longer staged."""


class Leases(Protocol):
    """What a lease holder does with its lease: renew it, check it, end it."""

    def extend(self, token: str, lease_ms: int) -> bool:
        """Renew the lease; False when the token no longer holds it."""

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        """``extend`` every token in one round trip; a lease already past its deadline is not
        renewed (the reaper may be acting on it), unless it expired only because the authority's
        clock stepped (``note_clock_step``)."""

    def lease_exists(self, token: str) -> bool:
        """Whether ``token`` still holds a lease."""

    def ack(self, token: str) -> bool:
        """Forget the lease and its payload: the task needs nothing more from the queue."""

    def ack_many(self, tokens: list[str]) -> list[bool]:
        """``ack`` every token in one round trip, each as if alone; one answer per token, in order."""

    def retry_later(self, token: str, delay_ms: int) -> bool:
        """Move the leased payload to the delayed set, due after ``delay_ms``."""

    def requeue(self, token: str, front: bool = False) -> bool:
        """Move the leased payload back to ready at once."""

    def dead_letter(
        self, token: str | None, raw: str, reason: str, task_id: int | None = None, unless_lettered: bool = False
    ) -> bool:
        """Keep the payload in the dead-letter list with its reason; with a token, only while it holds.

        ``unless_lettered`` (without a token, with a task id): not when the list already holds a
        dead letter of that task. O(dead letters): for the rare fallback of a lost lease only."""


class Recovery(Protocol):
    """The reaper's moves: expired leases, stale staging, due retries, a clock that stepped back."""

    def expired(self, limit: int, start: float = 0.0) -> list[Delivery]:
        """Leases whose deadline has passed, in deadline order, at most ``limit``: the oldest, or
        when more have expired, those from ``start`` (0 <= start < 1) of the way into the rest.
        None within the quiet period after a forward step of the clock."""

    def unstage(self, grace_ms: int, limit: int) -> int:
        """Put payloads staged for longer than ``grace_ms`` (their claimer died) back at the front
        of ready; returns how many."""

    def promote_due(self, limit: int) -> int:
        """Move delayed payloads that are due into ready; returns how many."""

    def clamp(self, lease_ms: int, max_delay_ms: int, limit: int) -> int:
        """Bring lease deadlines past now + ``lease_ms`` and retry due times past now +
        ``max_delay_ms`` (a backward step of the authority clock) to those horizons; how many."""


class QueueInspection(Protocol):
    """Reading the queue for operators and displays, and the operator's dead-letter removal."""

    def in_flight(self, limit: int) -> list[Delivery]:
        """Current leases, oldest claim first, at most ``limit`` (for display and operators)."""

    def stats(self) -> QueueStats: ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]: ...

    def remove_dead_letters(self, task_ids: Collection[int] | None) -> list[DeadLetter]:
        """Remove and return the dead letters of these tasks (or all, with None), newest first:
        one pass over the list, however many tasks."""


class QueueScan(Protocol):
    """The task ids the payloads name: the reconciler's paged lap, or all at once."""

    def referenced_task_ids(self) -> set[int]:
        """Task ids named by any payload in ready, delayed or processing: O(queue), for tests and
        operators (the reconciler reads them a page at a time)."""

    def referenced_page(self, cursor: Any, limit: int) -> tuple[set[int], Any]:
        """Task ids named by about ``limit`` payloads of delayed, then ready, then processing,
        from ``cursor`` (None starts a lap). Returns them and the next cursor, None once the lap
        has ended. A payload that stays put during a lap is named in it; one moving along that
        flow (delayed -> ready -> processing) is named at least once."""


class Leadership(Protocol):
    """One process at a time in a fleet-wide role (the reaper's, the reconciler's)."""

    def lead(self, role: str, worker_id: str, ttl_ms: int) -> bool:
        """Hold (take, or renew) the fleet's lease on ``role`` for ``ttl_ms`` of authority time;
        False while another process has it."""


class OriginalLeftovers(Protocol):
    """What the original note's workers leave in processing (ARCHITECTURE.md, Switching over)."""

    def leftovers(self, limit: int) -> Leftovers:
        """Processing entries no lease holds and processing_ts entries no lease names (what the
        original note's workers leave), at most ``limit`` of each. Cheap when there are none;
        otherwise it reads everything in flight, so call it at the reconciler's rate."""

    def release_leftovers(self, payloads: Sequence[str], stamps: Sequence[tuple[int, str]], seen_at_ms: int) -> int:
        """Move one lease-less copy of each payload from processing to the claim end of ready, and
        delete each processing_ts entry that still holds the value given. ``seen_at_ms``: the
        authority time read before the ``leftovers`` call that found them; a leased copy is never
        taken, even when another sweeper released the payload and a worker claimed it since.
        Returns how many payloads moved."""


class ClockStepLog(Protocol):
    """The fleet's record of the authority clock's steps (ARCHITECTURE.md, Clocks)."""

    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        """Record, for the fleet, that the authority's clock stepped: it reads ``new_ms`` where
        ``old_ms`` was expected, some time in the ``since_ms`` since the reporter's previous read
        (ARCHITECTURE.md, Clocks). From then until ``lease_ms`` after the report, on either clock,
        ``expired`` finds nothing and a lease live before the step may be renewed. Called by the
        clock before it hands out the new time; never reads the clock."""


class CancelMarks(Protocol):
    """The operator's cancel (ARCHITECTURE.md, Operator surface): marks a worker checks at its heartbeats."""

    def mark_cancelled(self, task_ids: Collection[int]) -> None:
        """Mark these tasks cancelled: a worker running one stops it at its next heartbeat, and
        an attempt that starts on one ends at once (failed, "cancelled by operator")."""

    def cancel_marks(self, task_ids: Collection[int]) -> set[int]:
        """Which of these tasks carry a cancel mark (one round trip, O(len(task_ids)))."""

    def clear_cancelled(self, task_ids: Collection[int]) -> None:
        """Remove the marks: the cancel is settled, or an operator's retry reopened the task."""


class TaskQueue(
    Clock,
    Claims,
    Leases,
    Recovery,
    QueueInspection,
    QueueScan,
    Leadership,
    OriginalLeftovers,
    ClockStepLog,
    CancelMarks,
    Protocol,
):
    """The Redis side, every role: ready list, leases, delayed retries, dead letters. ``now_ms``
    is the authority clock as this queue sees it."""


# -- the source of truth (MySQL), a write store and a read-only view store -------------------------------


class TaskLookup(Protocol):
    """One row, whole (with its document): what a fenced write is checked against, and what a view shows."""

    def get(self, task_id: int) -> Task | None: ...


class TaskStore(TaskLookup, Protocol):
    """The writes: every write of an attempt is fenced on ``attempt``."""

    def create(
        self,
        task_name: str,
        document: str,
        max_attempts: int | None = None,
        rubric: str | None = None,
        priority: str | None = None,  # its lane (domain/lanes/model.py); None: the default lane
        tenant: str | None = None,
        traceparent: str | None = None,
    ) -> Task: ...

    def start_attempt(self, task_id: int, token: str) -> StartOutcome:
        """pending -> processing, attempt + 1, lease_token = token; reports what it found otherwise."""

    # ``usage``: the attempt's LLM usage, added to the row's in the same fenced write (the row
    # sums every attempt that wrote an outcome); None or no calls leave the row's usage as it is.
    def commit(self, task_id: int, attempt: int, result: dict[str, Any], usage: Usage | None = None) -> bool:
        """processing -> success for this attempt only."""

    def retry(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        """processing -> pending for this attempt only, charged: retry_count + 1."""

    def hand_back(
        self, task_id: int, attempt: int, why: str, usage: Usage | None = None, counted: bool = False
    ) -> bool:
        """processing -> pending for this attempt only, uncharged (the budget is kept): the one way
        a row goes back to pending for someone else's fault (a verdict's hand-back, a lost lease,
        an orphan, the reconciler's recovery, the original workers' leftovers). ``counted``: one
        more of the task's bounded hand-backs (``handbacks``, I12)."""

    def fail(self, task_id: int, attempt: int, error: str, usage: Usage | None = None) -> bool:
        """processing -> failed for this attempt only."""

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        """The writes, then the starts, as one transaction: each row still fenced on its own status
        and attempt, exactly as the single-row methods above (which are groups of one). A row whose
        fence fails is left untouched (``written`` False, a start reports what it found); the
        rest of the group lands. A crash leaves the whole group applied or none of it."""

    def reopen(self, task_id: int) -> bool:
        """Operator's retry: failed -> pending with a fresh attempt budget."""

    def cancel_pending(self, task_id: int, attempt: int, error: str) -> bool:
        """Operator's cancel of a task no attempt runs: pending -> failed, fenced on ``attempt``
        (the row's counter as read), so it never lands on a row an attempt has started since."""

    def delete(self, task_id: int) -> bool: ...


class TaskViews(TaskLookup, Protocol):
    """Read-only listings and figures; listings leave ``document`` out (None)."""

    def get_many(self, task_ids: Iterable[int]) -> list[Task]: ...

    def recent(self, limit: int = 50) -> list[Task]: ...

    def non_terminal_after(self, cursor: tuple[Any, int] | None, limit: int) -> list[Task]:
        """Pending/processing rows ordered by (updated_at, task_id) after ``cursor`` (index range)."""

    def counts(self) -> dict[str, int]:
        """Rows per status, every status present."""

    def usage_totals(self, window_s: int = 3600) -> tuple[Usage, Usage]:
        """The LLM usage of every row, and of the rows last written within ``window_s`` of the
        store's now, in one aggregate (``model`` None; ``cost_usd`` None when nothing was priced)."""

    def search(self, status: TaskStatus | None = None, name_contains: str = "", limit: int = 50) -> list[Task]:
        """Newest first, at most ``limit``, of one status (or any) whose name contains the text
        (case as the database compares it; ``%`` and ``_`` are plain characters). No documents."""

    def finished_per_minute(self, minutes: int) -> dict[str, list[int]]:
        """Tasks that ended ``success`` and ``failed`` in each of the last ``minutes`` minutes of the
        database's clock, oldest first, the current minute last (the dashboard's throughput chart)."""


class TaskRepository(TaskStore, TaskViews, LaneViews, Protocol):
    """The MySQL side, every role: the source of truth."""


class WorkerRegistry(Protocol):
    """The live workers: each process beats its record with a TTL and removes it at a clean stop,
    so a killed process disappears when its TTL runs out."""

    def beat(self, record: WorkerRecord, ttl_ms: int) -> None:
        """Write (or renew) ``record``; it counts as live for ``ttl_ms`` of authority time."""

    def remove(self, worker_id: str) -> None: ...

    def live(self) -> list[WorkerRecord]:
        """Records whose TTL has not run out, ordered by id; expired entries are cleaned on the way."""


class DashboardSessions(Protocol):
    """What the dashboard keeps on the server, shared by every process that serves it (docs/DEPLOY.md,
    Security): the key that signs its cookies and the generation a logged-in cookie must name, both
    random and made on first use (never derived from the token), and failed logins per client."""

    def current(self) -> tuple[bytes, str]:
        """The signing key and the generation in force."""

    def end_all(self) -> str:
        """A new generation: every session issued before it is refused from now on (a logout)."""

    def failures(self, client: str) -> int:
        """Failed logins from ``client`` in the current window (authority clock)."""

    def fail(self, client: str) -> int:
        """One more failed login from ``client``; the window's count with it."""
