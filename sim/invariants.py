"""The invariants of DESIGN section 7, checked as the run goes and at its end.

- At the call that breaks them (``sim.ledger``, ``sim.observers``, the workers): I4 (a second
  commit, or a fenced write of a stale attempt landing), I5 (an attempt over the budget), I8 (a
  lease lost by a worker that renewed it less than a lease ago).
- After every event, at most once per second of virtual time (``after_event``): I1 (a row or a
  Redis entry still processing past lease + reaper interval + margin after the last sign of life
  of its attempt), I8 (an attempt running past PROCESSING_TIMEOUT_SECONDS, plus the time its
  calls waited on the fleet's limits or a provider's hold: not the document's time), the SIGTERM release
  of D11; every 10 s: I3 (a live task no Redis structure names: at once a violation, unless a
  known loss since its latest attempt explains it, and then only for as long as the reconciler
  needs) and I7 (a bad payload gone without a dead letter).
- After every event: I9 (an attempt charged, retried or failed, whose latest LLM call failed
  because the provider was down, or because its own host was cut off from the LLM while the
  provider served others, the cut still in force when the charge was written (the fault
  ``llm_partition``; a cut that ended before the gate's check looks like a poison document's
  failure to the product, as the end of an outage does: domain/tasks/verdict.py); I12 (DESIGN section 14, issue 22):
  (a) no task has more counted hand-backs than DOCLLM_MAX_HANDBACKS, and no task is handed back
  uncharged for an LLM failure more than that many times while the provider served its host (the
  latest call failed neither for an outage nor for its host's partition: the provider answered
  that host's check, so every such hand-back must count towards the bound); (b) no attempt is
  charged a timeout ("attempt exceeded PROCESSING_TIMEOUT_SECONDS") whose running time, less the
  time its calls waited for their turn on the fleet's limits or under a provider's hold (measured
  by the SimLLM around the RateGate), was under the bound. (c), a poison batch ends ``failed``
  within the bound, is I2's: its bound counts max_attempts + max_handbacks attempts a task.
- Every 10 s: HEALTH and PRESENCE (``check_processes``), on what the processes' own health check
  and the worker registry say.
- At the end (``final``): I2 (every task finished within the bound, queue empty), I5 (a failed
  task has its dead letter), I7, the ledger against the database, and RATE (a provider limit the
  fleet shares: the LLM refused next to no call over it).

Bounds are extended by the time the system could not make progress for reasons outside the
design: Redis or the database down (plus the runtime's backoff after it), no reaper or no
reconciler alive. After a known loss (Redis data loss, a producer dying between its insert and
its push) the reconciler's bound applies: grace + 2 reconcile intervals + the I1 bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from docllm.domain.tasks.verdict import HOST_CUT, STORE_DOWN, WAITED
from docllm.runtime.presence import beat_seconds
from sim.ledger import FAILED, PROCESSING, TERMINAL

if TYPE_CHECKING:  # pragma: no cover
    from sim.system import System

# no_ready_reaper: no reaper that has read the clock for half a lease (sim.actors.ReaperActor)
REAP_BLOCKERS = ("redis", "db", "no_reaper", "no_ready_reaper")
RATE_SLACK = 2  # 429s over a shared limit a run may see (a crash mid-turn, a Redis restart)
ALL_BLOCKERS = ("redis", "db", "no_reaper", "no_ready_reaper", "no_reconciler")
TIME_CHECK_MS = 1_000
LOSS_CHECK_MS = 10_000
STALL_MS = 60_000  # HEALTH: how far back a stall may be explained by an outage or a pause
TIMEOUT_CHARGE = "attempt exceeded PROCESSING_TIMEOUT_SECONDS"  # domain.tasks.verdict: a timeout's error
WAIT_SLACK_MS = 1_000  # I12 (b): rounding of the runtime's timers against the harness's measure
# Hand-backs "handed back uncharged" for reasons other than the LLM (a daily spend cap: the operator's, I16).
NOT_LLM = (STORE_DOWN, WAITED, "SpendCapReached:")
# A host's check is answered (or not) within this much of its hand-back (SimLLM.check: 0.05-0.5 s).
CHECK_MS = 1_000


class Checker:
    def __init__(self, system: System):
        self.sys = system
        self.next_time_check = 0
        self.next_loss_check = LOSS_CHECK_MS
        self.releases: list[tuple[int, int, int, str, str]] = []  # (task, attempt, by, why, worker): D11
        self.unreferenced: dict[int, int] = {}  # task -> first seen in no Redis structure
        self.charges_seen = 0  # ledger.charged entries already checked (I9, I12)
        self.handed_seen = 0  # ledger.handed entries already checked (I12)
        self.batch_charges_seen = 0  # ledger.charged entries already checked for batched attempts (I15)

    def after_event(self) -> None:
        now = self.sys.world.now
        if len(self.sys.ledger.charged) > self.charges_seen:
            self.check_outage_charges()
        if len(self.sys.ledger.charged) > self.batch_charges_seen:
            self.check_batch_charges()
        if len(self.sys.ledger.handed) > self.handed_seen:
            self.check_handbacks()
        if now >= self.next_time_check:
            self.next_time_check = now + TIME_CHECK_MS
            self.check_time_bounds()
            deploy = getattr(self.sys, "deploy", None)
            if deploy is not None:
                deploy.check()  # FALLBACK (sim/deployments.py)
        if now >= self.next_loss_check:
            self.next_loss_check = now + LOSS_CHECK_MS
            self.check_nothing_lost()
            self.check_processes()

    # -- HEALTH, PRESENCE ----------------------------------------------------------------------
    def check_processes(self) -> None:
        """HEALTH: what a live process's /healthz answers (``Service.healthy``): no part of its
        runtime died, and no loop stalled while nothing held it up (Redis or the database down,
        a pause). PRESENCE: a live worker that has beaten for two periods with Redis up and no
        data loss since is listed by the worker registry (``docllm workers``)."""
        registry = getattr(self.sys, "registry", None)
        listed = {r.id for r in registry.live()} if registry is not None else None
        for actor in self.sys.actors:
            service = getattr(actor, "service", None)
            if service is None or not actor.alive or getattr(actor, "stopping", False):
                continue
            self._check_health(actor, service)
            if listed is not None and service.presence is not None:
                self._check_presence(actor, listed)

    def _check_health(self, actor: Any, service: Any) -> None:
        windows, now = self.sys.world.windows, self.sys.world.now
        since = now - STALL_MS
        held = windows.overlap(("redis", "db"), since, now) or actor.last_pause_end > since
        for problem in service.healthy()[1]:
            if "died" in problem or not held:
                self.sys.ledger.violate("HEALTH", None, f"{actor.label} reports itself unhealthy: {problem}")

    def _check_presence(self, actor: Any, listed: set[str]) -> None:
        s, now = self.sys, self.sys.world.now
        settled = now - 2 * beat_seconds(s.settings.lease_seconds) * 1000
        # A forward step of the authority clock expires every record until its next beat.
        stepped = any(t >= settled for t in getattr(s, "clock_steps", ()))
        quiet = not s.world.windows.overlap(("redis",), settled, now) and s.ledger.last_loss_after(settled) is None
        alive_since = max(actor.booted_at, actor.last_pause_end)
        if quiet and not stepped and alive_since < settled and actor.worker_id not in listed:
            s.ledger.violate("PRESENCE", None, f"{actor.label} is alive but not in the worker registry")

    # -- I1, I8 (overrun), D11 ---------------------------------------------------------------
    def deadline(self, last_life: int, bound_ms: int) -> int:
        """When an attempt whose owner was last alive at ``last_life`` is overdue (I1)."""
        led, windows, now = self.sys.ledger, self.sys.world.windows, self.sys.world.now
        deadline, kinds = last_life + bound_ms, REAP_BLOCKERS
        allowance = self.sys.step_allowance_ms
        for step in self.sys.clock_steps:  # reclaimed within a lease of the clamp or the quiet windows
            if step >= last_life - allowance:
                deadline = max(deadline, step + bound_ms + allowance)
        loss = led.last_loss_after(last_life)
        if loss is not None:
            deadline, kinds = max(deadline, loss + self.sys.recovery_ms), ALL_BLOCKERS
        return deadline + windows.overlap(kinds, last_life, now)

    def check_time_bounds(self) -> None:
        s, led = self.sys, self.sys.ledger
        now = s.world.now
        overrun_ms = int(s.settings.processing_timeout_seconds * 1000) + s.lease_ms // 3 + s.bound_ms
        bound_s = s.bound_ms / 1000
        batches = getattr(s, "batch_watch", None)
        for tid in led.processing:
            book = led.books[tid]
            if batches is not None and (tid, book.attempt) in batches.batched:
                self.check_batched(book, batches, now)  # its batch is its heartbeat: I15's bound
                continue
            since = book.processing_since or 0
            waited = s.llm.waited_ms(book.token, now)  # on limits and holds: not counted (I12)
            limit = since + overrun_ms + waited + s.world.windows.overlap(ALL_BLOCKERS, since, now)
            alive = book.owner_alive or now - book.last_life <= s.bound_ms
            if now > limit and alive:
                led.violate(
                    "I8",
                    tid,
                    f"attempt {book.attempt} has run {(now - since) / 1000:.0f}s, its worker "
                    f"still alive, past PROCESSING_TIMEOUT_SECONDS="
                    f"{s.settings.processing_timeout_seconds:g} without being abandoned",
                    key=("overrun", book.attempt),
                    t=limit,
                )
            if book.owner_alive:
                continue
            due = self.deadline(book.last_life, s.bound_ms)
            if now > due:
                led.violate(
                    "I1",
                    tid,
                    f"row still processing (attempt {book.attempt}) more than {bound_s:.0f}s "
                    f"after its worker's last sign of life at {book.last_life / 1000:.1f}s",
                    key=("row", book.attempt),
                    t=due,
                )
        for key, tid, last_life, what in s.redis_stuck():
            due = self.deadline(last_life, s.bound_ms)
            if now > due:
                led.violate(
                    "I1",
                    tid,
                    f"{what} more than {bound_s:.0f}s after its worker's last sign of life at {last_life / 1000:.1f}s",
                    key=("redis", key),
                    t=due,
                )
        if self.releases:
            self._check_releases(now)

    # -- I15 (the batch lane, sim/batches.py) ------------------------------------------------------
    def check_batched(self, book: Any, batches: Any, now: int) -> None:
        """I15: an attempt a batch runs leaves ``processing`` within the bound the product states
        (``Settings.batch_bound_seconds``, the window scaled) from when its batch was opened, plus
        the time Redis, the database or the provider was down (a poller cannot hand back what it
        cannot write, nor cancel a batch the provider does not hear of) or no reaper ran, and after
        a Redis data loss the reconciler's recovery (the members' leases went with it)."""
        s, led = self.sys, self.sys.ledger
        opened = batches.batched[(book.task_id, book.attempt)]
        due = opened + batches.bound_ms
        loss = led.last_loss_after(opened)
        if loss is not None:
            due = max(due, loss + s.recovery_ms)
        due += s.world.windows.overlap(ALL_BLOCKERS + ("llm",), opened, now)
        if now > due:
            led.violate(
                "I15",
                book.task_id,
                f"batched attempt {book.attempt} (batch {batches.refs[(book.task_id, book.attempt)][:8]}) still "
                f"processing {(now - opened) / 1000:.0f}s after its batch was opened: over the bound of "
                f"{batches.bound_ms / 1000:.0f}s",
                key=("batch", book.attempt),
                t=due,
            )

    def check_batch_charges(self) -> None:
        """I15: a batched attempt is charged (retried or failed) only for a failed line of its own
        in a result file (the document's 400, or a 500 past the hand-back bound): never for its
        batch's expiry, a lost file, a cancel, or a process killed on the way."""
        s = self.sys
        batches = getattr(s, "batch_watch", None)
        led = s.ledger
        if batches is None:
            return
        for t, tid, attempt, _token, error in led.charged[self.batch_charges_seen :]:
            if (tid, attempt) in batches.batched and (tid, attempt) not in batches.api.failed_lines:
                led.violate(
                    "I15",
                    tid,
                    f"batched attempt {attempt} was charged at {t / 1000:.1f}s with no failed line of its own "
                    f"({error[:90]})",
                    key=("charged", attempt),
                    t=t,
                )
        self.batch_charges_seen = len(led.charged)

    def expect_release(self, task_id: int, attempt: int, by: int, why: str, worker: str) -> None:
        """D11: a worker stopped with SIGTERM settles this attempt by ``by``."""
        self.releases.append((task_id, attempt, by, why, worker))

    def forget_releases(self, worker: str) -> None:
        """The worker crashed during its shutdown: a crash, not a shutdown; I1 applies."""
        self.releases = [r for r in self.releases if r[4] != worker]

    def _paused_since(self, label: str, t: int) -> bool:
        actor = next((a for a in self.sys.actors if a.label == label), None)
        return actor is not None and actor.last_pause_end > t

    def _check_releases(self, now: int) -> None:
        led, windows = self.sys.ledger, self.sys.world.windows
        keep = []
        for tid, attempt, by, why, worker in self.releases:
            book = led.books.get(tid)
            if book is None or book.status != PROCESSING or book.attempt != attempt:
                continue
            if led.last_loss_after(book.last_life) is not None:
                continue  # Redis lost the lease: the reconciler's bound (I1, I3) applies
            if windows.overlap(("redis", "db"), by - self.sys.grace_ms - 2_000, by):
                continue  # the release could not be written: the lease's expiry settles it (I1)
            if self._paused_since(worker, by - self.sys.grace_ms - 2_000):
                continue  # a frozen process cannot release: the lease's expiry settles it (I1)
            if now > by:
                led.violate(
                    "I1",
                    tid,
                    f"{why}: attempt {attempt} still processing when the shutdown grace "
                    f"was over (D11: abandoned until its lease or timeout ends)",
                    key=("release", attempt),
                    t=by,
                )
                continue
            keep.append((tid, attempt, by, why, worker))
        self.releases = keep

    # -- I9 --------------------------------------------------------------------------------------
    def check_outage_charges(self) -> None:
        """I9: an attempt is never charged for its LLM call failing because the provider was down,
        or because its own host was cut off from it (a reaper's reclaim after its worker crashed is
        charged for the crash, as D6 wants). I12 (b): nor charged a timeout for time it waited."""
        s = self.sys
        led, llm, llms = s.ledger, s.llm, s.llms()
        limit_ms = int(s.settings.processing_timeout_seconds * 1000)
        for t, tid, attempt, token, error in led.charged[self.charges_seen :]:
            if token is None:
                continue
            for each in llms:  # each deployment keeps its own outage failures, in its own words
                if token in each.outage_failed and str(each.outage_error()) in error:
                    who = "the provider" if each.deployment is None else f"deployment {each.deployment}"
                    led.violate(
                        "I9",
                        tid,
                        f"attempt {attempt} was charged (retry_count + 1) at {t / 1000:.1f}s although its LLM "
                        f"call failed because {who} was down",
                        key=attempt if each.deployment is None else (each.deployment, attempt),
                        t=t,
                    )
            host = llm.partition_failed.get(token)
            if host is not None and llm.cut.get(host, -1) > t and "simulated partition of host" in error:
                led.violate(
                    "I9",
                    tid,
                    f"attempt {attempt} was charged at {t / 1000:.1f}s although its LLM call failed because "
                    f"its own host was cut off from the LLM while others were served ({error[:90]})",
                    key=("partition", attempt),
                    t=t,
                )
            started = led.token_started.get(token)
            if TIMEOUT_CHARGE in error and started is not None:
                waited = llm.waited_ms(token, t)
                ran = t - started - waited
                if ran < limit_ms - WAIT_SLACK_MS:
                    led.violate(
                        "I12",
                        tid,
                        f"attempt {attempt} was charged a timeout at {t / 1000:.1f}s after running "
                        f"{(t - started) / 1000:.1f}s, {waited / 1000:.1f}s of it waiting on the fleet's limits "
                        f"or a provider's hold: {ran / 1000:.1f}s of its own, under "
                        f"PROCESSING_TIMEOUT_SECONDS={limit_ms / 1000:g}",
                        key=("waited", attempt),
                        t=t,
                    )
        self.charges_seen = len(led.charged)

    def check_handbacks(self) -> None:
        """I12 (a): hand-backs while the provider serves are bounded per task (see the docstring)."""
        s = self.sys
        led, llms, bound = s.ledger, s.llms(), s.settings.max_handbacks
        batches = getattr(s, "batch_watch", None)
        for t, tid, attempt, token, error, counted in led.handed[self.handed_seen :]:
            book = led.books.get(tid)
            if book is None:
                continue
            if counted and book.handbacks > bound:
                led.violate(
                    "I12",
                    tid,
                    f"attempt {attempt} was handed back uncharged at {t / 1000:.1f}s, counted, the task's "
                    f"hand-back {book.handbacks}: over DOCLLM_MAX_HANDBACKS={bound} ({error[:80]})",
                    key=("counted", book.handbacks),
                    t=t,
                )
            llm_reason = "handed back uncharged" in error and not error.startswith(NOT_LLM)
            if batches is not None and (tid, attempt) in batches.batched and error.startswith("batch "):
                # The end of its batch (expired, lost file, batcher stopped): uncounted by the batch
                # lane's design (issue 28), so not bounded by DOCLLM_MAX_HANDBACKS; counted here
                # apart (``BatchWatch.batch_handbacks``): an open question for I12, not checked.
                batches.batch_handbacks[tid] += 1
                continue
            served = token is not None and not any(
                token in each.outage_failed or token in each.partition_failed for each in llms
            )
            if served and error.startswith(HOST_CUT) and self._cut_lately(token, t, llms):
                # Its call failed on its own (the provider served) but the gate's check after it
                # ran while the host was cut off: the provider did not answer that host's check.
                served = False
            if llm_reason and served and all(each.down_since is None for each in llms):
                book.llm_handbacks += 1
                if book.llm_handbacks > bound:
                    led.violate(
                        "I12",
                        tid,
                        f"attempt {attempt} was handed back uncharged at {t / 1000:.1f}s for the LLM while the "
                        f"provider served its host: the task's {book.llm_handbacks}th such hand-back, over "
                        f"DOCLLM_MAX_HANDBACKS={bound} ({error[:80]})",
                        key=("served", book.llm_handbacks),
                        t=t,
                    )
        self.handed_seen = len(led.handed)

    def _cut_lately(self, token: str, t: int, llms: list[Any]) -> bool:
        """Whether the host of ``token``'s worker was cut off from the LLM within ``CHECK_MS``
        before ``t`` (a cut is recorded when it begins, with its end)."""
        actor = self.sys.holder(token)
        return actor is not None and any(each.cut.get(actor.name, -1) > t - CHECK_MS for each in llms)

    # -- I3, I7 ------------------------------------------------------------------------------
    def known_loss(self, book: Any) -> str | None:
        """A known loss (Redis data loss, a producer or reconciler dying between its two writes)
        that happened since the task's latest attempt or state change, or since the claim of its
        attempt's lease (a batcher holds its claims up to DOCLLM_BATCH_MAX_WAIT_SECONDS before it
        starts them: a loss in between takes the lease of an attempt that starts after it), and
        so may explain it."""
        claimed = self.sys.ledger.token_claimed.get(book.token, book.attempt_started) if book.token else None
        since = min(book.state_since, book.attempt_started, claimed if claimed is not None else book.attempt_started)
        for t, task, why in reversed(self.sys.ledger.causes):
            if t < since:
                break
            if task in (None, book.task_id):
                return why
        return None

    def check_nothing_lost(self) -> None:
        s, led = self.sys, self.sys.ledger
        now, windows = s.world.now, s.world.windows
        referenced, payloads = s.referenced()
        settings = s.settings
        window = (
            int((settings.reconcile_grace_seconds + 2 * settings.reconcile_interval_seconds) * 1000)
            + LOSS_CHECK_MS
            + s.restart_max_ms
        )
        seen = self.unreferenced
        for tid, book in led.books.items():
            if book.status in TERMINAL or tid in referenced:
                seen.pop(tid, None)
                continue
            since = seen.setdefault(tid, now)
            why = self.known_loss(book)
            if why is None:
                led.violate(
                    "I3",
                    tid,
                    f"task is {book.status} but no Redis structure refers to it, and no known loss explains it",
                )
            elif now > since + window + windows.overlap(ALL_BLOCKERS, since, now):
                led.violate(
                    "I3",
                    tid,
                    f"task is {book.status} and no Redis structure has referred to it for "
                    f"{(now - since) / 1000:.0f}s ({why}): the reconciler did not recover it",
                )
        for raw, bad in led.bad.items():
            if bad.confirmed or raw in payloads:
                continue
            if led.last_loss_after(bad.pushed_at) is not None:
                bad.confirmed = True  # Redis lost it with everything else: not the design's doing
                continue
            led.violate(
                "I7",
                None,
                f"{bad.why} payload {raw[:50]!r} pushed at {bad.pushed_at / 1000:.1f}s "
                f"left Redis without a dead letter",
                key=raw,
            )

    # -- reaper cost (D8) --------------------------------------------------------------------
    def reaper_cycle(self, who: str, round_trips: int, items_read: int, settled: int) -> None:
        if not self.sys.scenario.reaper_cost:
            return
        if round_trips + items_read > 4 + 10 * settled:
            self.sys.ledger.violate(
                "D8",
                None,
                f"{who}'s cycle made {round_trips} round trips and read "
                f"{items_read} entries to settle {settled} expired lease(s)",
                key="cost",
            )

    # -- the end -----------------------------------------------------------------------------
    def final(self, drained: bool, faults_end: int, bound_ms: int) -> None:
        s, led = self.sys, self.sys.ledger
        now = s.world.now
        self.check_time_bounds()
        self.check_nothing_lost()
        if not drained:
            for tid, book in led.books.items():
                if book.status not in TERMINAL:
                    led.violate(
                        "I2",
                        tid,
                        f"still {book.status} {(now - faults_end) / 1000:.0f}s after the "
                        f"faults stopped; the settings imply {bound_ms / 1000:.0f}s",
                    )
            if led.nonterminal == 0:
                led.violate("I2", None, f"every task finished but the queue is not empty: {s.leftovers()}")
        money = getattr(s, "money", None)
        if money is not None:
            money.final()  # SPEND's books (sim/money.py)
        rpm, refused = s.scenario.llm.provider_rpm, s.llm.limit_429s
        if rpm and refused > RATE_SLACK:
            led.violate("RATE", None, f"the LLM refused {refused} calls over its limit of {rpm} a minute", key="rate")
        dead = s.dead_letter_task_ids()
        last_loss = led.data_losses[-1] if led.data_losses else -1
        for tid, book in led.books.items():
            if book.status == FAILED and tid not in dead and (book.failed_at or 0) > last_loss and not book.cancelled:
                led.violate("I5", tid, "failed, but its payload is not in the dead-letter list")
        for tid, (status, _attempt, retry_count) in s.rows().items():
            book = led.books.get(tid)
            if book is None or book.status != status:
                led.violate(
                    "MODEL",
                    tid,
                    f"the database says {status}, the harness's ledger {book.status if book else 'no such task'}",
                )
            if retry_count > s.settings.max_attempts and s.design == "product":
                led.violate("I5", tid, f"retry_count {retry_count} over max_attempts {s.settings.max_attempts}")

    def summary_counts(self) -> dict[str, Any]:
        led = self.sys.ledger
        return {"stuck": len(led.stuck), "lost": len(led.lost)}
