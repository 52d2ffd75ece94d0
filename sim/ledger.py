"""The harness's own bookkeeping of every task, kept from what the port calls returned.

The observers (``sim.observers`` for the product, ``sim.original`` for the note's design) feed it;
the checks of ``sim.invariants`` read it, so that checking after every event costs a few dict
look-ups instead of reads of Redis and the database. ``Ledger.violate`` records a violation once
per (invariant, task, key), with the length of the trace at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.world import World

PENDING, PROCESSING, SUCCESS, FAILED = "pending", "processing", "success", "failed"
TERMINAL = (SUCCESS, FAILED)


@dataclass
class Book:
    task_id: int
    name: str
    created_at: int
    status: str = PENDING
    attempt: int = 0  # the fencing number of the latest started attempt
    token: str | None = None  # the lease token of the latest started attempt (product)
    counted: int = 0  # attempts in the current budget (I5)
    max_counted: int = 0
    handbacks: int = 0  # counted hand-backs (I12): at most DOCLLM_MAX_HANDBACKS
    llm_handbacks: int = 0  # uncharged hand-backs for the LLM while the provider served this host (I12)
    commits: int = 0
    processing_since: int | None = None
    state_since: int = 0  # when the row entered its current status
    attempt_started: int = 0  # when the latest attempt started
    max_processing_ms: int = 0
    last_life: int = 0  # last sign of life of the attempt's owner (a lease renewal, ...)
    owner_alive: bool = False  # original design: a worker still holds the task
    owner: object = None  # original design: which worker slot holds it
    failed_at: int | None = None
    cancelled: bool = False  # failed by an operator's cancel (no dead letter expected, I5)
    cancel_marked_at: int | None = None  # the operator marked it while it ran
    renewals_after_mark: int = 0  # lease renewals since: each heartbeat also reads the marks


@dataclass
class BadPayload:
    raw: str
    pushed_at: int
    why: str
    confirmed: bool = False  # seen going to the dead-letter list


@dataclass
class Violation:
    invariant: str
    t: int
    task_id: int | None
    message: str
    trace_len: int


@dataclass
class Ledger:
    world: World
    books: dict[int, Book] = field(default_factory=dict)
    processing: dict[int, None] = field(default_factory=dict)  # an ordered set of task ids
    nonterminal: int = 0
    last_commit: int = 0  # when the latest commit landed (true ms)
    renew: dict[str, int] = field(default_factory=dict)  # lease token -> last renewal (true ms)
    token_task: dict[str, int | None] = field(default_factory=dict)
    token_holder: dict[str, str] = field(default_factory=dict)  # lease token -> actor label
    causes: list[tuple[int, int | None, str]] = field(default_factory=list)  # known losses
    data_losses: list[int] = field(default_factory=list)
    bad: dict[str, BadPayload] = field(default_factory=dict)
    dead_tasks: dict[int, int] = field(default_factory=dict)  # task id -> dead-lettered at
    violations: list[Violation] = field(default_factory=list)
    # (t, task, attempt, token, error) of every attempt charged (retried or failed): I9
    charged: list[tuple[int, int, int, str | None, str]] = field(default_factory=list)
    # (t, task, attempt, token, error, counted) of every uncharged hand-back of an attempt: I12
    handed: list[tuple[int, int, int, str | None, str, bool]] = field(default_factory=list)
    token_started: dict[str, int] = field(default_factory=dict)  # lease token -> its attempt's start
    token_claimed: dict[str, int] = field(default_factory=dict)  # lease token -> when it was claimed
    timeline: list[tuple[int, int, str, str]] = field(default_factory=list)  # (t, task, kind, who)
    stuck: set[int] = field(default_factory=set)
    lost: set[int] = field(default_factory=set)
    _seen: set[tuple] = field(default_factory=set)

    # -- recording ---------------------------------------------------------------------------
    def violate(
        self, invariant: str, task_id: int | None, message: str, key: object = None, t: int | None = None
    ) -> None:
        mark = (invariant, task_id, key)
        if mark in self._seen:
            return
        self._seen.add(mark)
        when = self.world.now if t is None else t
        self.violations.append(Violation(invariant, when, task_id, message, len(self.world.trace)))
        self.world.log("VIOLATION", f"{invariant}: {message}", task=task_id)
        if invariant == "I1" and task_id is not None:
            self.stuck.add(task_id)
        if invariant == "I3" and task_id is not None:
            self.lost.add(task_id)

    def fault(self, kind: str, text: str, task: int | None = None) -> None:
        self.world.fault_counts[kind] += 1
        self.world.log("fault", text, task=task, who="faults")

    def arm(self, text: str) -> None:
        """A crash armed to happen later: counted when (if) it fires."""
        self.world.log("fault", text, who="faults")

    def mark(self, task_id: int | None, kind: str, who: str | None = None) -> None:
        """A point of the per-task timeline (``--plot``)."""
        if task_id is not None:
            if who is None:
                who = self.world.current.label if self.world.current is not None else "sim"
            self.timeline.append((self.world.now, task_id, kind, who))

    def cause(self, task_id: int | None, why: str) -> None:
        """Something outside the product's control may have lost this task (None: any task)."""
        self.causes.append((self.world.now, task_id, why))
        self.world.log("note", f"known cause of loss: {why}", task=task_id)

    # -- task life ---------------------------------------------------------------------------
    def created(self, task_id: int, name: str) -> None:
        self.books[task_id] = Book(
            task_id, name, self.world.now, state_since=self.world.now, attempt_started=self.world.now
        )
        self.nonterminal += 1
        self.mark(task_id, "created")

    def book(self, task_id: int) -> Book | None:
        return self.books.get(task_id)

    def set_status(self, book: Book, status: str) -> None:
        now, old = self.world.now, book.status
        if old == status:
            return
        if old == PROCESSING:
            self.processing.pop(book.task_id, None)
            if book.processing_since is not None:
                book.max_processing_ms = max(book.max_processing_ms, now - book.processing_since)
            book.processing_since = None
        if status == PROCESSING:
            self.processing[book.task_id] = None
            book.processing_since = now
        if old in TERMINAL and status not in TERMINAL:
            self.nonterminal += 1
        elif old not in TERMINAL and status in TERMINAL:
            self.nonterminal -= 1
        if status == FAILED:
            book.failed_at = now
        book.status, book.state_since = status, now

    def started(self, book: Book, attempt: int, token: str | None, budget: int) -> None:
        book.attempt, book.token, book.attempt_started = attempt, token, self.world.now
        if token is not None:
            self.token_started[token] = self.world.now
        book.counted += 1
        book.max_counted = max(book.max_counted, book.counted)
        book.last_life = self.renew.get(token, self.world.now) if token else self.world.now
        self.set_status(book, PROCESSING)
        self.mark(book.task_id, "start")
        if book.counted > budget:
            self.violate(
                "I5", book.task_id, f"attempt {book.counted} started, the budget is {budget}", key=book.counted
            )

    def committed(self, book: Book, attempt: int) -> None:
        book.commits += 1
        if book.status != PROCESSING or book.attempt != attempt:
            self.violate(
                "I4",
                book.task_id,
                f"attempt {attempt} committed while the row is {book.status} under attempt "
                f"{book.attempt} (a stale attempt's result landed)",
                key=("stale", attempt),
            )
        if book.commits > 1:
            self.violate("I4", book.task_id, f"committed {book.commits} times", key=("double", book.commits))
        self.set_status(book, SUCCESS)
        self.last_commit = self.world.now
        self.mark(book.task_id, "commit")

    def cancel_requested(self, book: Book, result: str) -> None:
        """The operator's cancel came back: ``running`` means its worker must stop it (C1)."""
        if result == "running" and book.cancel_marked_at is None:
            book.cancel_marked_at, book.renewals_after_mark = self.world.now, 0
        self.mark(book.task_id, f"cancel {result}")

    def cancelled(self, book: Book) -> None:
        book.cancelled, book.cancel_marked_at = True, None
        self.set_status(book, FAILED)
        self.mark(book.task_id, "cancelled")

    def check_cancel(self, book: Book, what: str) -> None:
        """C1: a cancelled task never starts again; a running one commits nothing after a
        heartbeat of its attempt that read the mark (two renewals since it: one may have been
        followed by a failed read)."""
        if what == "start" and book.cancelled:
            self.violate("C1", book.task_id, "an attempt started on a task the operator cancelled", key="start")
        marked = book.cancel_marked_at
        if marked is not None and self.last_loss_after(marked) is not None:
            return  # Redis lost data since: the mark may be gone with it
        if what == "commit" and marked is not None and book.renewals_after_mark >= 2:
            self.violate(
                "C1",
                book.task_id,
                f"committed after {book.renewals_after_mark} heartbeats since the operator cancelled it at "
                f"{marked / 1000:.1f}s (its worker must stop it at the next one)",
                key="commit",
            )

    def fenced_write(self, book: Book, attempt: int, what: str) -> None:
        if book.status != PROCESSING or book.attempt != attempt:
            self.violate(
                "I4",
                book.task_id,
                f"{what} of attempt {attempt} landed while the row is {book.status} under attempt {book.attempt}",
                key=(what, attempt),
            )

    def moved(self, task_id: int | None) -> None:
        """A live process took the task's payload (staged or leased it): whatever crash comes
        next, I1's bound counts from here. An orphaned row's recovery rides on its payload."""
        book = self.books.get(task_id) if task_id is not None else None
        if book is not None:
            book.last_life = max(book.last_life, self.world.now)

    def renewed(self, token: str) -> None:
        self.renew[token] = self.world.now
        task_id = self.token_task.get(token)
        book = self.books.get(task_id) if task_id is not None else None
        if book is not None and book.token == token:
            book.last_life = self.world.now
            if book.cancel_marked_at is not None:
                book.renewals_after_mark += 1

    def bad_payload(self, raw: str, why: str) -> None:
        self.bad[raw] = BadPayload(raw, self.world.now, why)

    def dead_lettered(self, raw: str, task_id: int | None) -> None:
        bad = self.bad.get(raw)
        if bad is not None:
            bad.confirmed = True
        if task_id is not None:
            self.dead_tasks[task_id] = self.world.now
            self.mark(task_id, "dead")

    def last_loss_after(self, t: int) -> int | None:
        later = [x for x in self.data_losses if x >= t]
        return later[-1] if later else None
