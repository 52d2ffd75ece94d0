"""Ports: what the domain needs from the outside world, as Protocols.

Every time in these signatures is the authority's time (the Redis server's clock, ARCHITECTURE.md, Clocks)
in milliseconds; no port takes or returns a worker's wall clock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from docllm.domain.batches import Batch, BatchCount, BatchMember, BatchState, ProviderBatch
from docllm.domain.breaker import BreakerView
from docllm.domain.budget import BudgetView, Grant, Settle
from docllm.domain.lane_figures import LaneFigures
from docllm.domain.model import (
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
from docllm.domain.rate_limits import ProviderHints
from docllm.domain.review_cache import CachedChunk
from docllm.domain.rubric import Rubric
from docllm.domain.usage import Usage
from docllm.domain.workers import WorkerRecord


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
        priority: str | None = None,  # its lane (domain/lanes.py); None: the default lane
        tenant: str | None = None,
        traceparent: str | None = None,
        fresh: bool = False,  # review it without the review cache (its answers replace the entries)
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


class LaneViews(Protocol):
    """The figures of lanes and tenants (issue 26), for ``stats``, metrics and the dashboard."""

    def lane_figures(self, window_s: int, top_tenants: int) -> LaneFigures:
        """Per lane and for the ``top_tenants`` tenants with most pending rows: depth, in flight,
        waits of attempts started, rows ended within ``window_s`` of the store's now. Bounded
        reads: the rows not yet ended and those ended in the window, grouped by the store."""


class TaskRepository(TaskStore, TaskViews, LaneViews, Protocol):
    """The MySQL side, every role: the source of truth."""


class BatchStore(Protocol):
    """The durable record of provider batches (issue 28; MySQL, beside the tasks): written before
    the provider is asked anything, so no batch it holds is forgotten (domain/batches.py)."""

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


class DocumentReviewer(Protocol):
    """The LLM (or the offline checks): a document in, a report (see ``domain.report``) out.

    Raises TransientError (retry later), PermanentError (the task fails) or ConfigurationError
    (the deployment is wrong; stop claiming).
    """

    name: str

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        """Cancelling the call cancels the request in flight and sends no further one (I11).
        Each LLM call is reported with ``docllm.domain.usage.record`` (the attempt's meter).
        ``rubric``: the task's (the offline reviewer runs its rules, the LLM's prompt carries its
        instructions); callers pass it only when the task names one, so None is the old call."""

    async def check(self) -> None:
        """Cheap probe of the configuration; raises ConfigurationError when it is wrong."""


async def review_with(
    reviewer: DocumentReviewer, task_name: str, document: str, rubric: Rubric | None
) -> dict[str, Any]:
    """How every caller calls a reviewer: the rubric is passed only when there is one, so a
    reviewer written before rubrics (a test double, a wrapper) gets exactly the call it always got."""
    if rubric is None:
        return await reviewer.review(task_name, document)
    return await reviewer.review(task_name, document, rubric)


class RubricCatalog(Protocol):
    """Where rubrics are found by name (``DOCLLM_RUBRICS_DIR``)."""

    def get(self, name: str) -> Rubric:
        """The rubric, validated; RubricError when there is none of that name or it is invalid."""


class WorkerRegistry(Protocol):
    """The live workers: each process beats its record with a TTL and removes it at a clean stop,
    so a killed process disappears when its TTL runs out."""

    def beat(self, record: WorkerRecord, ttl_ms: int) -> None:
        """Write (or renew) ``record``; it counts as live for ``ttl_ms`` of authority time."""

    def remove(self, worker_id: str) -> None: ...

    def live(self) -> list[WorkerRecord]:
        """Records whose TTL has not run out, ordered by id; expired entries are cleaned on the way."""


class LlmBreaker(Protocol):
    """The fleet's circuit breaker on the LLM provider (ARCHITECTURE.md, LLM boundary), shared by every process
    and decided on the authority clock: outcomes of LLM calls go into a time window; a failure
    ratio over it opens the breaker; after the open interval it is half-open, and one probe lease
    at a time may test the provider; a probe that passes closes it."""

    def record(self, ok: bool, count: int = 1) -> BreakerView:
        """Count ``count`` outcomes (``ok``: the provider served; not ok: it failed for provider
        reasons) and return the state after them; a failure may open it."""

    def view(self) -> BreakerView:
        """The state now; open becomes half-open once the open interval has passed."""

    def try_probe(self, worker_id: str) -> bool:
        """Take the one probe lease (half-open only, and only while nobody else holds it)."""

    def probe_result(self, worker_id: str, ok: bool) -> BreakerView:
        """The probe of ``worker_id`` answered: closed when it passed, open for another interval when
        not. A process without the lease changes nothing."""


class EventSink(Protocol):
    """Where services report what happened (logs, metrics, the simulation's trace)."""

    def emit(self, event: str, **fields: Any) -> None: ...


class RateLimiter(Protocol):
    """The fleet's share of one LLM's rate limits (``domain.rate_limits``), on the authority clock."""

    def acquire(self, tokens: int) -> float:
        """Charge one request estimated at ``tokens``: 0 when it may go now, else the seconds to
        wait before asking again (and nothing is charged)."""

    def settle(self, delta_tokens: int, hints: ProviderHints) -> None:
        """Correct the charge by what the answer used (``delta_tokens`` = used - charged) and take
        what the provider said about its limits, for everyone."""

    def headroom(self) -> dict[str, Any]:
        """A flat view of what could be sent now (``docllm stats``)."""


class SpendBudget(Protocol):
    """The fleet's LLM spend today against its cap (``domain.budget``, I14), on the authority clock."""

    def add(self, micro_usd: int, by_deployment: Mapping[str, int] | None = None) -> BudgetView:
        """Add what attempts spent to today's count, and each deployment's share (name ->
        micro-dollars) to its own, in one atomic step; the view after it."""

    def view(self) -> BudgetView:
        """Today's spend, what is held, and the cap in force."""

    def reserve(self, key: str, deployment: str, micro_usd: int, hold_ms: int, deployment_cap: int | None) -> Grant:
        """Hold ``micro_usd`` under ``key`` at ``deployment`` for at most ``hold_ms``, in one atomic
        step, only when it fits under the fleet's cap and ``deployment_cap`` (micro-dollars; None:
        none) beside today's spend and every hold (``domain/services/ledger.py``, I16). A key held
        already is granted again, unchanged."""

    def settle(self, items: Sequence[Settle]) -> BudgetView:
        """Count each item's spend (today, and each deployment's share) and take it off its key's
        hold, releasing what is left when the item says so; one atomic step."""

    def set_cap(self, usd: float | None) -> BudgetView:
        """The fleet's cap, over every process's setting (0: no cap); None: back to the settings."""


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


class ReviewCache(Protocol):
    """The review cache's reads (issue 46, domain/review_cache.py): a table of its own, shared by
    the fleet. Entries are written by the store, in the transaction of the commit they came from
    (``FencedWrite.cache``); every time is the authority's, in ms."""

    def find(self, keys: Sequence[str], since_ms: int) -> dict[str, CachedChunk]:
        """The entries of these keys written at or after ``since_ms`` (older ones have expired)."""

    def sweep(self, before_ms: int, limit: int) -> int:
        """Remove at most ``limit`` entries written before ``before_ms``; how many went."""
