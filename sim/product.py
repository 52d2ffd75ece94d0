"""The product under test, wired through ``docllm.container.Container`` with overrides: the
authority clock, fakeredis (Lua), SQLite in memory, the simulated LLM, the settings, a seeded
retry policy, a seeded token factory and an event sink that writes the trace.

Each actor's ports are ``Faulty(Gate(Observer(real adapter)), its crash budget)``: a crash can
land between any two port calls, an outage makes every call raise ``Unavailable``, and the
observer keeps the ledger.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from types import SimpleNamespace
from typing import Any

from dependency_injector import providers

from docllm.adapters.redis.breaker import RedisLlmBreaker
from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.adapters.redis.rate_limiter import RedisRateLimiter
from docllm.adapters.redis.registry import RedisWorkerRegistry
from docllm.container import Container, breaker_policy
from docllm.domain.errors import Unavailable
from docllm.domain.llm.rate_gate import RateGate
from docllm.domain.tasks.cancel import Canceller
from docllm.domain.tasks.outcome import Reason
from docllm.domain.tasks.policies import RetryPolicy
from docllm.entrypoints.bootstrap import build_parts
from docllm.runtime.assembly import Wiring
from docllm.runtime.service import Service
from sim.actors import Operator, Producer, ReaperActor, ReconcilerActor, WorkerActor
from sim.batches import BatchWatch
from sim.breaks import get as get_break
from sim.deployments import DeploymentWatch
from sim.fault_injection import CrashBudget
from sim.lanes import LaneWatch
from sim.money import MoneyWatch
from sim.observers import Gate, QueueObserver, RepoObserver, task_of
from sim.system import System

PLOTTED = {
    "reclaimed": "reclaim",
    "requeued": "requeue",
    "lease_lost": "lease_lost",
    "stale_attempt": "stale",
    "reconciled": "reconciled",
    "duplicate_ignored": "duplicate",
}


class AuthorityTime:
    """``time()`` of the simulated Redis server, for a process's RedisServerClock (as ``host``
    reads it: off every other read while its reads flap, the fault ``clock_step_flap``)."""

    def __init__(self, system: Any, host: str | None = None):
        self._s, self._host = system, host

    def time(self) -> tuple[int, int]:
        ms = self._s.clock.now_ms()
        if self._host is not None:
            ms += self._s.flap_offset(self._host)
        return ms // 1000, (ms % 1000) * 1000


class TraceEvents:
    """The domain's EventSink: every event into the trace, some onto the plotted timeline; a lost
    lease is checked against I8 and an abandoned attempt remembered for I11."""

    def __init__(self, system: ProductSystem):
        self.sys = system

    def emit(self, event: str, **fields: Any) -> None:
        if event == "lease_renewed":
            return
        if event == "reclaimed":
            self.sys.reclaimed(fields["task_id"], fields["attempt"])
        elif event == "abandoned":
            self.sys.abandoned[fields["token"]] = self.sys.world.now
            if fields["reason"] == Reason.lease_lost:  # the runtime acts on a lost lease (I8)
                self.sys.lease_lost(fields["task_id"], fields["attempt"], fields["token"])
        task_id = fields.get("task_id")
        shown = " ".join(f"{k}={v}" for k, v in fields.items() if k not in ("task_id", "worker"))
        self.sys.world.log("event", f"{event} {shown}".rstrip(), task_id)
        if event in PLOTTED:
            self.sys.ledger.mark(task_id, PLOTTED[event])


class _TraceHandler(logging.Handler):
    """The runtime's log in the simulation: warnings go to the trace, an error is a finding."""

    def __init__(self, system: ProductSystem):
        super().__init__(logging.DEBUG)
        self.sys = system

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.levelno >= logging.ERROR:
            where = f": {record.exc_info[1]!r}" if record.exc_info else ""
            self.sys.ledger.violate("ERR", None, f"the runtime logged an error: {text}{where}", key=text[:80])
        elif record.levelno >= logging.WARNING:
            self.sys.world.log("log", text)


async def _inline(fn: Any, *args: Any) -> Any:
    """The limiter's port calls, on the loop itself: Redis answers on virtual time at once."""
    return fn(*args)


# The clock's step warnings (a flapping host makes hundreds) would reach stderr through logging's
# last resort; the run's trace and checker know every step already.
logging.getLogger("docllm.clock").addHandler(logging.NullHandler())
# So would the registry beat's warning at each simulated Redis outage (I8's check sees the registry).
logging.getLogger("docllm.presence").addHandler(logging.NullHandler())


def sim_logger(system: ProductSystem) -> logging.Logger:
    """A logger of this run alone (not registered with ``logging``: runs never share one)."""
    logger = logging.Logger("docllm.sim")
    logger.addHandler(_TraceHandler(system))
    return logger


class ProductSystem(System):
    design = "product"

    def build(self) -> None:
        s = self.settings
        self.brk = brk = get_break(self.options.brk if self.options is not None else None)
        self.events = TraceEvents(self)
        self.abandoned: dict[str, int] = {}  # lease token -> when its attempt was abandoned (I11)
        self.logger = sim_logger(self)
        c = self.container = Container()
        c.settings.override(s)
        c.clock.override(self.clock)
        c.redis_client.override(self.client)
        c.engine.override(self.engine)
        c.reviewer.override(self.llm)
        if s.llm_rpm or s.llm_tpm:  # the fleet's limits: the real limiter on this run's Redis and clock
            limiter = ((brk and brk.limiter_class) or RedisRateLimiter)(
                self.client, s.queue_prefix, self.clock, s.llm_base_url, s.llm_model, s.llm_rpm, s.llm_tpm
            )
            limiter = brk.wrap_limiter(limiter) if brk else limiter
            self.llm.gate = RateGate(Gate(limiter, self.down, "redis", self.ledger), run=_inline)
        if brk and brk.hints_parser:
            self.llm.parse_hints = brk.hints_parser
        c.events.override(self.events)
        # The spend ledger's Redis side, watched (SPEND, sim/money.py), when the run prices calls.
        self.money = MoneyWatch(self) if s.price_table.entries else None
        if self.money is not None:
            c.spend_budget.override(self.money.port)
            self.llm.prices, self.llm.spent_at = s.price_table, "default"
        else:  # nothing priced, no cap: no spend gate (runs as before the ledger)
            c.spend_budget.override(providers.Object(None))
        retry = RetryPolicy(
            max_attempts=s.max_attempts,
            max_handbacks=s.max_handbacks,
            base_seconds=s.retry_base_seconds,
            cap_seconds=s.retry_max_seconds,
            rng=self.world.rng_for("retry"),
        )
        c.retry_policy.override(brk.retry_policy(retry) if brk else retry)
        counter = itertools.count(1)
        self.new_token = lambda: f"tok-{next(counter)}"
        queue_class = brk.queue_class if brk and brk.queue_class else RedisTaskQueue
        self.real_queue = queue_class(
            c.redis_client(), s.queue_prefix, clock=c.clock(), token_factory=self.new_token, lanes=s.lane_policy
        )
        c.queue.override(self.real_queue)
        self.lane_watch = LaneWatch(self)
        self.deploy = DeploymentWatch(self) if self.scenario.deployments else None
        self.batch_watch = BatchWatch(self, self.scenario.batches) if self.scenario.batches is not None else None
        repo = c.repository()
        self.real_repo = brk.wrap_repo(repo) if brk else repo
        self.queue_obs = QueueObserver(self.real_queue, self.ledger, self)
        self.repo_obs = RepoObserver(self.real_repo, self.ledger, s.max_attempts)
        self.gated_queue = Gate(self.queue_obs, self.down, "redis", self.ledger)
        self.gated_repo = Gate(self.repo_obs, self.down, "db", self.ledger)
        self.real_breaker = RedisLlmBreaker(self.client, s.queue_prefix, self.clock, breaker_policy(s))
        self.gated_breaker = Gate(self.real_breaker, self.down, "redis", self.ledger)
        self.registry = RedisWorkerRegistry(self.client, s.queue_prefix, clock=self.clock)
        self.gated_registry = Gate(
            brk.wrap_registry(self.registry) if brk else self.registry, self.down, "redis", self.ledger
        )
        sc = self.scenario
        if self.batch_watch is not None:
            self.batch_watch.api.racer = self._racer()
        self.actors = [WorkerActor(self, f"w{i + 1}", sc.slots) for i in range(self.n_workers)]
        self.actors += [ReaperActor(self, f"reaper{i + 1}") for i in range(sc.reapers)]
        self.actors.append(ReconcilerActor(self, "reconciler"))
        self.actors += [Producer(self, f"producer{i + 1}") for i in range(sc.producers)]
        if sc.operator:
            self.actors.append(Operator(self, "operator"))

    # -- ports and services per actor --------------------------------------------------------
    def reviewer_for(self, actor: Any) -> Any:
        """A worker host's reviewer: its link to the one provider, or the routed reviewer over the
        deployments (sim/deployments.py)."""
        return self.deploy.reviewer_for(actor) if self.deploy is not None else self.llm.for_host(actor.name)

    def llms(self) -> list[Any]:
        return [self.llm, *(self.deploy.llms.values() if self.deploy is not None else ())]

    def heal(self) -> None:
        super().heal()
        if self.deploy is not None:
            self.deploy.heal()
        if self.money is not None:
            self.money.heal()

    def ports_for(self, actor: Any) -> tuple[Any, Any]:
        brk = self.brk
        if brk and actor.kind == "reaper" and brk.reaper_clock:
            # A reaper that reads its own host's clock (a deliberately broken mechanism).
            own = RedisTaskQueue(
                self.client,
                self.settings.queue_prefix,
                clock=brk.reaper_clock(self, actor),
                token_factory=self.new_token,
            )
            return Gate(QueueObserver(own, self.ledger, self), self.down, "redis", self.ledger), self.gated_repo
        return self.queue_of(
            RedisServerClock(
                AuthorityTime(self, actor.name),
                resync_seconds=self.lease_ms / 3000,
                monotonic=lambda: self.world.now / 1000,
                lease_ms=self.lease_ms,
            )
        ), self.gated_repo

    def queue_of(self, clock: Any) -> Any:
        """A process's own queue adapter: it reads the authority like a real process does, one
        TIME per resync advanced by its monotonic clock, so it sees a step of the server's clock
        some time after it happened, and reports it."""
        queue_class = self.brk.queue_class if self.brk and self.brk.queue_class else RedisTaskQueue
        s = self.settings
        own = queue_class(self.client, s.queue_prefix, clock=clock, token_factory=self.new_token, lanes=s.lane_policy)
        return Gate(QueueObserver(own, self.ledger, self), self.down, "redis", self.ledger)

    def service(self, actor: Any, roles: tuple[str, ...], wiring: Wiring, **overrides: Any) -> Service:
        """The process's ``docllm.runtime.service.Service``, built as ``docllm worker`` and
        ``docllm reaper`` build theirs (``entrypoints.bootstrap.build_parts``) from this run's
        container, with the actor's own ports (its faults, its clock) and ``overrides`` (its
        reviewer, breaker and registry) in place. ``roles``: "worker", "reaper", "reconciler"."""
        c = self.container
        queue, repo = actor.ports()
        concurrency = getattr(actor, "slots", self.settings.concurrency)
        settings = self.settings_with(worker_id=actor.worker_id, concurrency=concurrency)
        if self.batch_watch is not None and "worker" in roles:  # its batcher's and poller's ports
            overrides = {**self.batch_watch.ports(actor, queue), **overrides}
        with (
            c.queue.override(queue),
            c.repository.override(repo),
            c.settings.override(settings),
            contextlib.ExitStack() as stack,
        ):
            for name, value in overrides.items():
                stack.enter_context(getattr(c, name).override(value))
            parts = build_parts(c, "worker" in roles, "reaper" in roles, "reconciler" in roles)
        if self.batch_watch is not None:
            self.batch_watch.scaled(parts)
        return Service(settings, parts, wiring)

    def _racer(self) -> Any:
        """A BatchPoller of no process, on the fleet's ports: the second poller of a race
        (sim/batches.py), built as a worker's is."""
        c, watch = self.container, self.batch_watch
        assert watch is not None
        leases = watch.ports(SimpleNamespace(budget=CrashBudget()), self.gated_queue)
        with (
            c.queue.override(self.gated_queue),
            c.repository.override(self.gated_repo),
            c.settings.override(self.settings_with(worker_id="racer")),
            c.batch_api.override(watch.api),
            c.batch_store.override(leases["batch_store"]),
            c.batch_leases.override(leases["batch_leases"]),
        ):
            poller = c.batch_poller()
        poller.bound_ms, poller.monotonic = watch.give_up_ms, watch.monotonic
        poller.leases = _BelievesItHolds(poller.leases)
        return poller

    def cancel(self, task_id: int) -> None:
        """``docllm cancel TASK_ID`` once (its wait loop is left out: the workers and the attempt's
        start must settle a running task on their own)."""
        book = self.ledger.books[task_id]
        try:
            [found] = Canceller(self.gated_repo, self.gated_queue, events=self.events).request([task_id])
        except Unavailable as exc:
            self.world.log("note", f"cancel failed: {exc}", task_id)
            return
        self.world.log("note", f"cancel -> {found.result.value}", task_id)
        self.ledger.cancel_requested(book, found.result.value)

    def op_latency(self) -> int:
        return int(self.rng.uniform(1, 20))

    # -- faults ------------------------------------------------------------------------------
    def push_raw(self, raw: str) -> None:
        try:
            self.gated_queue.push(raw)
        except Exception as exc:  # noqa: BLE001 - Redis is down: the fault is simply not delivered
            self.world.log("note", f"push failed: {exc}")
            self.ledger.bad.pop(raw, None)

    def arm_point(self, actor: Any, point: str) -> None:
        if point == "worker:after_claim":
            actor.budget.arm_at(("queue.claim_batch", "queue.lease_staged"), after=True)
        elif point == "worker:after_stage":
            actor.budget.arm_at("queue.stage", after=True)
        elif point == "worker:before_start":
            actor.budget.arm_at("repo.start_attempt", after=False)
        elif point == "worker:after_llm":
            actor.budget.arm_at(("repo.commit", "repo.retry", "repo.fail"), after=False)
        elif point == "worker:after_commit":
            actor.budget.arm_at("repo.commit", after=True)
        elif point == "worker:start_reply_lost":  # its next group of starts lands; the reply is lost
            actor.lost_start_replies += 1
        elif point == "worker:after_upload":  # the batch lane: its input file is at the provider
            actor.budget.arm_at("batch_api.upload", after=True)
        elif point == "worker:after_create":  # the provider's batch exists, its id not yet recorded
            actor.budget.arm_at("batch_api.create", after=True)
        elif point == "worker:mid_poll":  # the batch lane: a batch's results read, not yet applied
            actor.budget.arm_at("batch_api.content", after=True)
        elif point == "reaper:after_reclaim":
            actor.budget.arm_at("repo.retry", after=True)

    def drain_bound_ms(self) -> int:
        """I2: with batches, a batch opened as the faults stop may take the bound of I15 to end,
        and its members handed back then one more."""
        bound = super().drain_bound_ms()
        return bound + 2 * self.batch_watch.bound_ms if self.batch_watch is not None else bound

    def lease_lost(self, task_id: int, attempt: int, token: str) -> None:
        """I8: a lease renewed less than a lease ago must still hold (unless Redis lost it, or it
        was taken on a clock that a step had made stale: see docs/RELIABILITY.md, clock steps)."""
        now, last = self.world.now, self.ledger.renew.get(token, 0)
        since = now - last
        stale = any(now - self.lease_ms // 3 <= step <= now for step in self.clock_steps)
        if since < self.lease_ms and self.ledger.last_loss_after(last) is None and not stale:
            self.ledger.violate(
                "I8",
                task_id,
                f"the lease of attempt {attempt} was lost {since / 1000:.1f}s after "
                f"its last renewal (lease {self.lease_ms / 1000:.0f}s)",
                key=attempt,
            )

    def reclaimed(self, task_id: int, attempt: int) -> None:
        """I8: the reaper reclaimed an attempt whose worker is alive and was free to heartbeat for
        the whole last lease (not paused, heartbeats not held back, Redis and the database up)."""
        book = self.ledger.books.get(task_id)
        token = book.token if book is not None else None
        actor = self.holder(token)
        now, since = self.world.now, self.world.now - self.lease_ms - self.interval_ms
        if actor is None or not actor.alive or actor.last_pause_end > since or actor.last_no_beat_end > since:
            return
        if self.world.windows.overlap(("redis", "db"), since, now) or self.ledger.last_loss_after(since) is not None:
            return
        self.ledger.violate(
            "I8",
            task_id,
            f"attempt {attempt} was reclaimed while its worker {actor.label} was alive and free to renew its lease",
            key=("reclaimed", attempt),
        )

    def llm_call_ended(self, token: str | None, started: int) -> None:
        """I11: an abandoned attempt's LLM request is cancelled; none runs on, none starts after."""
        abandoned = self.abandoned.get(token) if token else None
        if abandoned is not None and abandoned < self.world.now:
            task_id = self.ledger.token_task.get(token)
            self.ledger.violate(
                "I11",
                task_id,
                f"an LLM call of lease {token} ran until "
                f"{self.world.now / 1000:.1f}s, after its attempt was abandoned at "
                f"{abandoned / 1000:.1f}s",
                key=("llm", token),
            )

    # -- what the checks read (raw, not through the faults) ---------------------------------
    def redis_stuck(self) -> list[tuple[Any, int | None, int, str]]:
        out = []
        for token, score in self.client.zrange(self.keys.lease_index, 0, 2, withscores=True):
            deadline = int(score) - self.clock_offset_ms()
            # True time of the last renewal; the deadline may be on a clock a step left behind.
            last_life = self.ledger.renew.get(token.decode(), deadline - self.lease_ms)
            if last_life + self.bound_ms >= self.world.now:
                break
            data = self.client.hget(self.keys.leases, token)
            task_id = task_of(json.loads(data)["raw"]) if data else None
            out.append((token, task_id, last_life, f"lease {token.decode()} still in Redis"))
        return out

    def clock_offset_ms(self) -> int:
        from sim.world import EPOCH_MS

        return EPOCH_MS + self.redis_offset_ms

    def referenced(self) -> tuple[set[int], set[str]]:
        payloads = set(self._payloads())
        return {t for t in map(task_of, payloads) if t is not None}, payloads

    def _payloads(self) -> list[str]:
        k, c = self.keys, self.client
        raws = c.lrange(k.ready, 0, -1) + c.zrange(k.delayed, 0, -1) + c.lrange(k.staging, 0, -1)
        raws += c.lrange(k.ready_interactive, 0, -1) + c.lrange(k.ready_bulk, 0, -1)
        for tenant_queue in (k.tenant_queue_interactive, k.tenant_queue_default, k.tenant_queue_bulk):
            raws += [v for f, v in c.hgetall(tenant_queue).items() if not f.endswith((b"|h", b"|t", b"#n"))]
        out = [r.decode("utf-8", "surrogateescape") for r in raws]
        out += [json.loads(v)["raw"] for v in c.hvals(k.leases)]
        return out

    def dead_letter_task_ids(self) -> set[int]:
        return {d.task_id for d in self.real_queue.dead_letters(1_000_000) if d.task_id is not None}

    def rows(self) -> dict[int, tuple[str, int, int]]:
        return {t.task_id: (t.status.value, t.attempt, t.retry_count) for t in self.real_repo.recent(1_000_000)}

    def leftovers(self) -> str:
        k, c = self.keys, self.client
        return (
            f"ready={c.llen(k.ready)} leases={c.zcard(k.lease_index)} delayed={c.zcard(k.delayed)} "
            f"staged={c.llen(k.staging)}"
        )

    def quiescent(self) -> bool:
        if self.ledger.nonterminal:
            return False
        k, c = self.keys, self.client
        return (
            self.real_queue.stats().ready == 0  # every lane's lists and tenant queues
            and c.zcard(k.lease_index) == 0
            and c.zcard(k.delayed) == 0
            and c.llen(k.staging) == 0
        )


class _BelievesItHolds:
    """The racer's batch leases: it takes its lease to be still its own (as a poller whose clock
    stepped, or whose renewal reply was lost, would), so only the store's fences stand between
    its apply and a second commit; every other call goes to the real leases."""

    def __init__(self, leases: Any):
        self._leases = leases

    def renew(self, ref: str, token: str, ttl_ms: int) -> bool:
        return token == "racer" or bool(self._leases.renew(ref, token, ttl_ms))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._leases, name)
