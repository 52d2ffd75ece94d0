"""The queue's invariants as a hypothesis state machine over the real domain services.

Ports are built by ``make_ports`` (in-memory fakes here; fakeredis and SQLite in a subclass), each
actor's port calls pass through a ``CrashBudget`` so a rule can kill it between any two calls,
and after every step the invariants of ARCHITECTURE.md, Invariants are checked. ``teardown`` stops the
faults and drives the system to quiescence to check liveness (I2).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from docllm.domain import events as ev
from docllm.domain.errors import BadPayload
from docllm.domain.events import RecordingEvents
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.leftovers import LeftoverSweep
from docllm.domain.tasks.model import Attempt, Leftovers, TaskStatus, WriteKind
from docllm.domain.tasks.outcome import Outcome
from docllm.domain.tasks.payload import make_payload, parse_payload
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from sim.fault_injection import Crash, CrashBudget, Faulty
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

LEASE = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)
GRACE_MS = 60_000
MAX_ATTEMPTS = 3
WORKERS = ("w1", "w2", "w3")
MALFORMED = ["not json", '{"task_name": "x"}', '{"task_id": "abc"}', "[1, 2]", '{"task_id": 999999}']
REPORT = {
    "findings": [],
    "summary": "ok",
    "reviewer": "offline",
    "model": "m",
    "chunks": 1,
    "usage": {"prompt_tokens": 0, "completion_tokens": 0},
}


class StubReviewer:
    name = "stub"

    async def review(self, task_name: str, document: str, rubric: object = None) -> dict:
        return dict(REPORT, summary=f"reviewed {task_name}")

    async def check(self) -> None:
        pass


class CountingRepository:
    """Counts committed results per task (I4) around any repository."""

    def __init__(self, inner):
        self.inner = inner
        self.commits: Counter[int] = Counter()

    def __getattr__(self, attr):
        return getattr(self.inner, attr)

    def commit(self, task_id, attempt, result, usage=None):
        ok = self.inner.commit(task_id, attempt, result, usage=usage)
        if ok:
            self.commits[task_id] += 1
        return ok

    def write_group(self, writes, starts=()):
        """A group's commits count as the single-row ones do (the worker commits reports in groups)."""
        outcome = self.inner.write_group(writes, starts)
        for write, ok in zip(writes, outcome.written, strict=True):
            if ok and write.kind is WriteKind.commit:
                self.commits[write.task_id] += 1
        return outcome


@dataclass
class Running:
    attempt: Attempt
    last_beat_ms: int


@dataclass
class Actor:
    budget: CrashBudget = field(default_factory=CrashBudget)
    running: list[Running] = field(default_factory=list)


class QueueMachine(RuleBasedStateMachine):
    reaper_class = Reaper

    def make_ports(self, clock: ManualClock, tokens):
        return InMemoryTaskQueue(clock, token_factory=tokens), InMemoryTaskRepository(clock)

    @initialize(n=st.integers(1, 3))
    def setup(self, n=1):
        self.clock = ManualClock()
        counter = itertools.count(1)
        queue, repo = self.make_ports(self.clock, lambda: f"t{next(counter)}")
        self.queue, self.repo = queue, CountingRepository(repo)
        self.events = RecordingEvents()
        self.retry = RetryPolicy(max_attempts=MAX_ATTEMPTS, base_seconds=1, cap_seconds=8, rng=random.Random(0))
        self.actors = {name: Actor() for name in WORKERS + ("reaper", "producer")}
        self.tasks: list[int] = []
        self.unpushed: set[int] = set()  # rows whose producer died before the push
        self.malformed = 0
        for _ in range(n):
            self._submit(None)

    # -- helpers -----------------------------------------------------------------------------
    def _ports(self, actor: str):
        budget = self.actors[actor].budget
        return Faulty(self.queue, budget, "queue"), Faulty(self.repo, budget, "repo")

    def _processor(self, worker: str) -> TaskProcessor:
        queue, repo = self._ports(worker)
        return TaskProcessor(queue, repo, StubReviewer(), self.clock, self.retry, LEASE, worker, events=self.events)

    def _reaper(self, actor: str = "reaper") -> Reaper:
        queue, repo = self._ports(actor)
        return self.reaper_class(queue, repo, self.retry, events=self.events)

    def _crash(self, actor: str) -> None:
        self.actors[actor].running.clear()  # a dead process keeps nothing
        self.actors[actor].budget.disarm()

    # -- producers and bad input -------------------------------------------------------------
    @rule(crash_after=st.sampled_from([None, None, None, 1]))
    def submit_task(self, crash_after):
        self._submit(crash_after)

    def _submit(self, crash_after):
        producer = self.actors["producer"]
        if crash_after is not None:
            producer.budget.arm(crash_after)
        queue, repo = self._ports("producer")
        before = len(self.repo.recent(1_000_000))
        try:
            task = submit(repo, queue, "doc.md", "# Title\n\nSome text.\n")
            self.tasks.append(task.task_id)
        except Crash:
            rows = self.repo.recent(1_000_000)
            if len(rows) > before:  # the row was written, the payload never pushed
                tid = max(r.task_id for r in rows)
                self.tasks.append(tid)
                self.unpushed.add(tid)
        producer.budget.disarm()

    @rule(data=st.data(), kind=st.sampled_from(["duplicate", "malformed", "crash", "reconcile", "old_worker"]))
    def chaos(self, data, kind):
        """Rarer events share one rule, so the common ones above get drawn more often."""
        if kind == "old_worker":
            self._old_worker_dies(data.draw(st.sampled_from(["took", "stamped", "marked"])))
        if kind == "duplicate" and self.tasks:
            self.queue.push(make_payload(data.draw(st.sampled_from(self.tasks)), "doc.md"))
        elif kind == "malformed":
            self.queue.push(data.draw(st.sampled_from(MALFORMED)))
            self.malformed += 1
        elif kind == "crash":
            self._crash(data.draw(st.sampled_from(WORKERS)))
        elif kind == "reconcile":
            self._reconciler().reconcile_once()

    def _old_worker_dies(self, after: str) -> None:
        """A worker of the original deployment (ARCHITECTURE.md, Switching over): ``BRPOPLPUSH ready processing``, then
        ``HSET processing_ts``, then ``mark_task_processing``; its container dies ``after`` one."""
        raw = self._old_take(None if after == "took" else str(self.clock.now_ms() // 1000))
        if raw is None:
            return
        task_id = _task_id(raw)  # None: a leftover all the same, released, then dead-lettered (I7)
        if task_id in self.tasks and after == "marked":
            self._old_mark_processing(task_id)

    def _old_take(self, stamp: str | None) -> str | None:
        return self.queue.original_take(stamp)

    def _old_mark_processing(self, task_id: int) -> None:
        self.repo.inner._update(task_id, lambda row: row.status is TaskStatus.pending, status=TaskStatus.processing)

    # -- workers -----------------------------------------------------------------------------
    @rule(worker=st.sampled_from(WORKERS), crash_after=st.sampled_from([None, None, 0, 1, 2]))
    def claim(self, worker, crash_after):
        actor = self.actors[worker]
        if crash_after is not None:
            actor.budget.arm(crash_after)
        proc = self._processor(worker)
        try:
            delivery = proc.claim()
            attempt = proc.begin(delivery) if delivery else None
        except Crash:
            self._crash(worker)
            return
        actor.budget.disarm()
        if attempt is not None:
            actor.running.append(Running(attempt, self.clock.now_ms()))

    @precondition(lambda self: any(self.actors[w].running for w in WORKERS))
    @rule(data=st.data())
    def heartbeat(self, data):
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.actors[w].running]))
        running = data.draw(st.sampled_from(self.actors[worker].running))
        fresh = self.clock.now_ms() - running.last_beat_ms < LEASE.lease_ms
        alive = self._processor(worker).heartbeat(running.attempt)
        # I8: a worker that keeps heartbeating within its lease is never reclaimed.
        assert alive or not fresh, f"lease lost although renewed {self.clock.now_ms() - running.last_beat_ms} ms ago"
        if alive:
            running.last_beat_ms = self.clock.now_ms()
        else:
            self.actors[worker].running.remove(running)

    @precondition(lambda self: any(self.actors[w].running for w in WORKERS))
    @rule(data=st.data())
    def complete(self, data):
        """The common case: the review succeeded and the worker commits."""
        self._finish(data, Outcome.success(dict(REPORT)), None)

    @precondition(lambda self: any(self.actors[w].running for w in WORKERS))
    @rule(
        data=st.data(),
        kind=st.sampled_from(["success", "retryable", "permanent"]),
        crash_after=st.sampled_from([None, 0, 1, 2, 3]),
    )
    def finish(self, data, kind, crash_after):
        """Any outcome, possibly crashing between two of the port calls that record it."""
        outcome = {
            "success": Outcome.success(dict(REPORT)),
            "retryable": Outcome.retryable("LLM 500"),
            "permanent": Outcome.permanent("unreviewable"),
        }[kind]
        self._finish(data, outcome, crash_after)

    def _finish(self, data, outcome, crash_after):
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.actors[w].running]))
        running = data.draw(st.sampled_from(self.actors[worker].running))
        self.actors[worker].running.remove(running)
        if crash_after is not None:
            self.actors[worker].budget.arm(crash_after)
        try:
            self._processor(worker).finish(running.attempt, outcome)
        except Crash:
            self._crash(worker)
        self.actors[worker].budget.disarm()

    @precondition(lambda self: any(self.actors[w].running for w in WORKERS))
    @rule(worker=st.sampled_from(WORKERS))
    def stall_past_lease(self, worker):
        """A slow-but-alive worker (a GC pause): its lease runs out, the reaper reclaims the task,
        the retry comes due and another worker claims it while the first still holds its attempt."""
        self.clock.advance(LEASE.lease_ms + LEASE.reaper_interval_seconds * 1000 + 1_000)
        self._reaper().reap_once()
        self.clock.advance(self.retry.cap_seconds * 1000)
        self.claim(worker, None)

    # -- time, reaper, reconciler ------------------------------------------------------------
    @rule(ms=st.sampled_from([2_000, 11_000, 31_000, 61_000]))
    def advance(self, ms):
        self.clock.advance(ms)

    @rule(crash_after=st.sampled_from([None, None, 1, 2, 3, 4]))
    def reap(self, crash_after):
        if crash_after is not None:
            self.actors["reaper"].budget.arm(crash_after)
        try:
            self._reaper().reap_once()
        except Crash:
            pass
        self.actors["reaper"].budget.disarm()

    def _reconciler(self) -> Reconciler:
        if not hasattr(self, "_rec"):
            sweep = LeftoverSweep(self.queue, self.repo, self.clock, GRACE_MS, events=self.events)
            self._rec = Reconciler(self.queue, self.repo, self.clock, GRACE_MS, events=self.events, leftovers=sweep)
        return self._rec

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def one_commit_per_task(self):  # I4
        if hasattr(self, "repo"):
            doubles = {t: n for t, n in self.repo.commits.items() if n > 1}
            assert not doubles, f"tasks committed more than once: {doubles}"

    @invariant()
    def attempts_bounded(self):  # I5
        if not hasattr(self, "repo"):
            return
        starts = Counter(f["task_id"] for name, f in self.events.events if name == ev.STARTED)
        over = {t: n for t, n in starts.items() if n > MAX_ATTEMPTS}
        assert not over, f"more than {MAX_ATTEMPTS} attempts: {over}"
        for row in self.repo.get_many(self.tasks):
            assert row.retry_count <= MAX_ATTEMPTS, f"task {row.task_id} retry_count {row.retry_count}"

    @invariant()
    def nothing_lost(self):  # I3: every live task is in Redis, or awaits the reconciler
        if not hasattr(self, "repo"):
            return
        referenced = self.queue.referenced_task_ids()
        rows = self.repo.get_many(self.tasks)
        if any(not row.status.terminal and row.task_id not in referenced for row in rows):
            # A leftover in processing is in Redis too: the leftover sweep recovers it. (Read
            # only when needed: on fakeredis every script call costs.)
            referenced |= {_task_id(raw) for raw in self.queue.leftovers(1 << 20).payloads}
        for row in rows:
            if not row.status.terminal and row.task_id not in referenced:
                assert row.task_id in self.unpushed, f"task {row.task_id} ({row.status.value}) is in no Redis structure"
            if row.task_id in referenced:
                self.unpushed.discard(row.task_id)

    def teardown(self):
        if not hasattr(self, "repo"):
            return
        self._drain()

    def _drain(self):
        """Faults stop; time runs; every task must end success/failed within the bound (I2, I1)."""
        for actor in self.actors.values():
            actor.budget.disarm()
            actor.running.clear()  # whatever was in flight belongs to crashed or stalled workers
        bound_ms = int(
            (
                MAX_ATTEMPTS * (LEASE.lease_seconds + LEASE.reaper_interval_seconds)
                + self.retry.max_total_backoff()
                + 2 * GRACE_MS / 1000
                + 60
            )
            * 1000
        )
        deadline = self.clock.now_ms() + bound_ms
        proc = self._processor("w1")
        reaper, reconciler = self._reaper(), self._reconciler()
        while self.clock.now_ms() <= deadline:
            while (delivery := proc.claim()) is not None:
                attempt = proc.begin(delivery)
                if attempt is not None:
                    proc.finish(attempt, asyncio.run(proc.review(attempt)))
            reaper.reap_once()
            reconciler.reconcile_once()
            rows = self.repo.get_many(self.tasks)
            if all(r.status.terminal for r in rows) and self._queue_empty():
                break
            self.clock.advance(LEASE.reaper_interval_seconds * 1000)
        rows = self.repo.get_many(self.tasks)
        stuck = [(r.task_id, r.status.value) for r in rows if not r.status.terminal]
        assert not stuck, f"not finished within {bound_ms} ms: {stuck}"
        stats = self.queue.stats()
        assert (stats.ready, stats.processing, stats.delayed) == (0, 0, 0), f"queue not empty: {stats}"
        left = self.queue.leftovers(100_000)
        assert left == Leftovers(), f"the original workers' leftovers are still there: {left}"
        for row in rows:  # I5: a failed task's payload is in the dead-letter list
            if row.status is TaskStatus.failed:
                assert any(d.task_id == row.task_id for d in self.queue.dead_letters(100_000)), row
        # I7: every malformed payload pushed is in the dead-letter list, with a reason.
        bad = [d for d in self.queue.dead_letters(100_000) if d.task_id is None or d.task_id == 999999]
        assert len(bad) >= self.malformed, f"{self.malformed} malformed pushed, {len(bad)} dead-lettered"

    def _queue_empty(self) -> bool:
        s = self.queue.stats()
        return s.ready == s.processing == s.delayed == 0 and self.queue.leftovers(1) == Leftovers()


def _task_id(raw: str) -> int | None:
    try:
        return parse_payload(raw, max_bytes=1 << 20).task_id
    except BadPayload:
        return None
