"""What both designs share in one run: the world, fakeredis, SQLite, the clocks, the LLM, the
ledger and checks, the fault plan, and the idle workers' wake-ups.

``ProductSystem`` (``sim.product``) and ``OriginalSystem`` (``sim.original``) add their actors.
"""

from __future__ import annotations

import asyncio
import functools
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import fakeredis

from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.settings import Settings
from sim.clocks import DbClock, WallClock, authority_clock, install_db_clock
from sim.faults import FaultPlan, restore
from sim.invariants import Checker
from sim.ledger import Ledger
from sim.llm import SimLLM, poison_name
from sim.lua_cache import install as compile_scripts_once
from sim.world import World

BACKOFF_CAP_MS = 15_000  # docllm.runtime.outage.Outage: a loop waits at most this after an outage
MARGIN_MS = 2_000


class System:
    design = "?"

    def __init__(self, scenario: Any, seed: int, tasks: int, workers: int, options: Any = None):
        self.scenario, self.seed, self.options = scenario, seed, options
        self.n_tasks, self.n_workers = tasks, workers
        self.world = world = World(seed)
        self.ledger = Ledger(world)
        self.settings: Settings = scenario.settings()
        s = self.settings
        self.keys = RedisKeys(s.queue_prefix)
        self.lease_ms = int(s.lease_seconds * 1000)
        self.interval_ms = int(s.reaper_interval_seconds * 1000)
        self.bound_ms = self.lease_ms + self.interval_ms + MARGIN_MS  # I1
        # After a step of the authority's clock: the resync that sees it, then the quiet period.
        self.step_allowance_ms = self.lease_ms + self.lease_ms // 3
        self.grace_ms = int(s.shutdown_grace_seconds * 1000)
        self.restart_max_ms = int(scenario.restart_s[1] * 1000)
        self.recovery_ms = (
            int((s.reconcile_grace_seconds + 2 * s.reconcile_interval_seconds) * 1000)
            + self.bound_ms
            + self.restart_max_ms
        )  # I3, after a known loss
        self._setup_clocks()
        compile_scripts_once()
        self.client = fakeredis.FakeRedis()
        self.engine = make_engine("sqlite://")
        install_db_clock(self.engine, self.db_clock)
        upgrade_schema(self.engine)
        self.llm = SimLLM(scenario.llm, world.rng_for("llm"), self.llm_call_ended, lambda: self.world.now)
        self.down = {"redis": False, "db": False}
        self.llm_outages: list[list[int | None]] = []  # [start, end] of each provider outage
        self.flaps: dict[str, tuple[int, int]] = {}  # host -> (end, offset ms) of its flapping TIME reads
        self.flap_shift: dict[str, int] = {}  # host -> the offset of its latest TIME read
        self.faults_active = True
        self.faults_end_ms = int(scenario.faults_s * 1000)
        self.idle: dict[tuple[str, int, int], tuple[Any, Callable[[], None]]] = {}
        self.waiters: dict[tuple[str, int, str], asyncio.Future[None]] = {}
        self.ready_dirty = False
        self.actors: list[Any] = []
        self.checker = Checker(self)
        self.plan = FaultPlan(self)
        self.rng = world.rng_for("system")
        world.after_event.append(self._after_event)
        world.on_error = self.error

    # -- setup -------------------------------------------------------------------------------
    def _setup_clocks(self) -> None:
        spec, r = self.scenario.clocks, self.world.rng_for("clocks")
        self.redis_offset_ms = int(r.uniform(-spec.skew_h, spec.skew_h) * 3_600_000) if spec.skew_redis else 0
        self.clock = authority_clock(self.world, lambda: self.redis_offset_ms)
        self.clock_steps: list[int] = []  # true times the authority's clock stepped
        self._clock_rng = r
        tz = r.choice(spec.db_tz)
        self.db_clock = DbClock(self.world, self._offset(spec, r), self._drift(spec, r), tz_hours=tz)
        self.wall: dict[str, WallClock] = {}

    @staticmethod
    def _offset(spec: Any, r: Any) -> int:
        if spec.skew_h <= 0:
            return 0
        hours = r.uniform(spec.min_skew_h, spec.skew_h) * r.choice((-1, 1))
        return int(hours * 3_600_000)

    @staticmethod
    def _drift(spec: Any, r: Any) -> float:
        return r.uniform(-spec.drift_ppm, spec.drift_ppm) if spec.drift_ppm else 0.0

    def wall_clock(self, name: str) -> WallClock:
        """The wall clock of the host an actor runs on (kept across its restarts)."""
        if name not in self.wall:
            spec, r = self.scenario.clocks, self._clock_rng
            self.wall[name] = WallClock(self.world, self._offset(spec, r), self._drift(spec, r))
        return self.wall[name]

    def restart_delay(self) -> int:
        lo, hi = self.scenario.restart_s
        if not self.faults_active:
            lo, hi = min(lo, 1.0), min(hi, 2.0)
        return int(self.rng.uniform(lo, hi) * 1000)

    def arrivals(self) -> list[tuple[int, str, str]]:
        """(time, task name, document) of every task the producers submit, in order (task names
        are unique: they identify an arrival until its row exists)."""
        sc, r = self.scenario, self.world.rng_for("arrivals")
        out = []
        kinds = sc.poison_kinds
        for n in range(1, self.n_tasks + 1):
            at = int(r.uniform(0, sc.arrival_s) * 1000)
            poison = r.random() < sc.poison
            name = poison_name(n, r.choice(kinds)) if poison else f"doc-{n}.md"
            out.append((at, name, f"# Document {n}\n\nSome text to review, part {n}.\n"))
        return sorted(out)

    def pending_arrivals(self, producer: Any) -> list[tuple[int, str, str]]:
        """The arrivals a producer still has to submit (the n-th producer takes every n-th)."""
        if not hasattr(self, "_arrivals"):
            self._arrivals = {name: (i, at, doc) for i, (at, name, doc) in enumerate(self.arrivals())}
        n, me = self.scenario.producers, self.actors_of("producer").index(producer)
        return [(at, name, doc) for name, (i, at, doc) in self._arrivals.items() if i % n == me]

    def arrival_open(self, name: str) -> bool:
        return name in self._arrivals

    def arrival_done(self, name: str) -> None:
        self._arrivals.pop(name, None)

    def boot(self) -> None:
        self.world.log(
            "note",
            f"{self.design} design, scenario {self.scenario.name}, seed {self.seed}; "
            f"clocks: redis {self.redis_offset_ms / 3_600_000:+.2f}h, db {self.db_clock.describe()}",
        )
        self.build()
        for actor in self.actors:
            actor.restart_delay_ms = self.restart_delay
            actor.boot()
        self.plan.schedule()
        self.world.at(self.faults_end_ms, self.heal)

    def build(self) -> None:
        raise NotImplementedError

    def actors_of(self, kind: str) -> list[Any]:
        return [a for a in self.actors if a.kind == kind]

    def holder(self, token: str | None) -> Any:
        """The worker actor that took the lease ``token`` (None when unknown)."""
        label = self.ledger.token_holder.get(token) if token else None
        return next((a for a in self.actors_of("worker") if a.label == label), None)

    # -- faults ------------------------------------------------------------------------------
    def heal(self) -> None:
        """Faults stop: services come back, dead actors restart at once, nothing is armed."""
        self.faults_active = False
        self.world.log("fault", "faults stop; the run goes on until quiescence", who="faults")
        for service in ("redis", "db"):
            if self.down[service]:
                self._up(service)
        self.llm_up()
        self.llm.cut.clear()
        self.llm.garbage_until = 0
        self.flaps.clear()
        for actor in self.actors:
            actor.budget.disarm()
            getattr(actor, "armed", set()).clear()
            if getattr(actor, "no_beat_until", 0) > self.world.now:
                actor.no_beat_until = actor.last_no_beat_end = self.world.now
            if actor.alive and actor.paused_until > self.world.now:
                actor.paused_until = actor.last_pause_end = self.world.now
                self.world.set_live(actor.kind, +1)
            if not actor.alive and actor.restarts:
                self.world.after(self.restart_delay(), actor._restart)

    def outage(self, service: str, ms: int) -> None:
        if self.down[service]:
            return
        self.down[service] = True
        self.world.windows.open(service, self.world.now)
        self.world.after(ms, lambda: self._up(service))

    def _up(self, service: str) -> None:
        if self.down[service]:
            self.down[service] = False
            self.world.windows.close(service, self.world.now, extra=BACKOFF_CAP_MS)
            self.world.log("fault", f"{service} is back", who="faults")
            self.ready_dirty = True

    def llm_outage(self, ms: int) -> None:
        """The LLM provider is unreachable for ``ms`` (or until the faults stop)."""
        if self.llm.down_since is not None:
            return
        self.llm.down_since = self.world.now
        self.world.windows.open("llm", self.world.now)
        self.llm_outages.append([self.world.now, None])
        self.world.after(ms, self.llm_up)

    def llm_up(self) -> None:
        if self.llm.down_since is not None:
            self.llm.down_since = None
            # Claims resume within one open interval of the breaker and one probe.
            self.world.windows.close("llm", self.world.now, extra=int(self.settings.breaker_open_seconds * 1000))
            self.llm_outages[-1][1] = self.world.now
            self.world.log("fault", "the LLM provider is back", who="faults")

    def llms(self) -> list[SimLLM]:
        """Every simulated provider: the one, or each deployment's too (``ProductSystem``)."""
        return [self.llm]

    def llm_partition(self, host: str, ms: int) -> None:
        """``host``'s link to the LLM is cut for ``ms`` (or until the faults stop)."""
        self.llm.cut[host] = max(self.llm.cut.get(host, 0), self.world.now + ms)
        self.world.after(ms, lambda: self.world.log("fault", f"{host} reaches the LLM again", who="faults"))

    def poison_batch(self, kind: str, n: int) -> None:
        """``n`` poison documents of one kind, submitted now by the producers (row, then push)."""
        if not hasattr(self, "_arrivals"):
            return
        first = len(self.ledger.books) + len(self._arrivals) + 1
        producers = self.actors_of("producer")
        for i in range(n):
            name = f"poison-{kind}-b{self.world.now}-{first + i}.md"
            index = 1_000_000 + self.world.fault_counts["poison_batch"] * 100 + i
            doc = f"# Poison {first + i}\n\nA document of a batch that fails every call.\n"
            self._arrivals[name] = (index, self.world.now, doc)
            producer = producers[index % len(producers)]
            if producer.alive:  # else its restart submits it (pending_arrivals)
                self.world.at(self.world.now + 1 + i, functools.partial(producer._submit, name, doc), producer)

    def flap_offset(self, host: str) -> int:
        """The offset of ``host``'s next read of the Redis server's TIME: while its flap lasts, every
        other read is off (so its RedisServerClock sees, and reports, a step at each resync). A
        change of offset is a step the fleet hears of: its quiet windows fall on both clocks."""
        end, off = self.flaps.get(host, (0, 0))
        if end <= self.world.now:
            self.flaps.pop(host, None)
            shift = 0
        else:
            shift = 0 if self.flap_shift.get(host, 0) else off
        before = self.flap_shift.get(host, 0)
        if shift != before:
            self.clock_steps.append(self.world.now)
            self.clock_steps.append(self.world.now + abs(shift - before))  # the other clock's windows
        self.flap_shift[host] = shift
        return shift

    def data_loss(self, snap: list | None, why: str) -> None:
        if snap is None:
            self.client.flushall()
        else:
            restore(self.client, snap)
        self.client.script_flush()
        self.ledger.data_losses.append(self.world.now)
        self.ledger.cause(None, why)
        self.after_data_loss()
        self.outage("redis", int(self.rng.uniform(1_000, 3_000)))

    def step_clock(self, ms: int) -> None:
        """The Redis server's clock steps by ``ms`` (an NTP step, a VM resume, a failover to a
        host whose clock is elsewhere)."""
        from sim.world import EPOCH_MS

        self.redis_offset_ms += ms
        self.clock.set(EPOCH_MS + self.redis_offset_ms + self.world.now)
        self.clock_steps.append(self.world.now)
        if ms < 0:  # the new clock meets the quiet windows of earlier steps again, -ms later
            self.clock_steps.append(self.world.now - ms)

    def failover(self, snap: list, lag_ms: int) -> None:
        if not self.faults_active:
            return
        self.ledger.fault("redis_failover", f"redis failover: the replica missed the last {lag_ms / 1000:.1f}s")
        self.data_loss(snap, f"redis failover lost the writes of the last {lag_ms / 1000:.1f}s")
        step = self.rng.choice((0, 0, -3_600_000, -60_000, 60_000, 3_600_000))
        if step:  # the new primary's host keeps another time
            self.ledger.fault(
                "redis_failover", f"the new primary's clock is {step / 60_000:+.0f} min off the old one's"
            )
            self.step_clock(step)

    def after_data_loss(self) -> None:
        self.ready_dirty = True

    def cancel(self, task_id: int) -> None:
        """``docllm cancel``: the original design has none."""
        self.world.log("note", "the original design cannot cancel a task")

    def push_raw(self, raw: str) -> None:
        raise NotImplementedError

    def llm_call_ended(self, token: str | None, started: int) -> None:
        """An LLM call answered (the product checks I11 here)."""

    def arm_point(self, actor: Any, point: str) -> None:
        raise NotImplementedError

    # -- idle workers ------------------------------------------------------------------------
    def idle_slot(
        self,
        actor: Any,
        slot: int,
        wake: Callable[[], None],
        poll_ms: int,
        on_timeout: Callable[[], None] | None = None,
    ) -> None:
        """A worker slot that found ready empty blocks (BLMOVE, BRPOPLPUSH): it wakes as soon as
        ready has an item, or after ``poll_ms`` (then ``on_timeout`` runs, else ``wake``)."""
        key = (actor.name, actor.incarnation, slot)
        self.idle[key] = (actor, wake)

        def poll() -> None:
            if self.idle.get(key, (None, None))[1] is wake:
                del self.idle[key]
                (on_timeout or wake)()

        actor.after(poll_ms, poll)

    def unidle(self, actor: Any) -> None:
        for key in [k for k in self.idle if k[0] == actor.name]:
            del self.idle[key]
        for key in [k for k in self.waiters if k[0] == actor.name]:
            del self.waiters[key]

    async def ready_wait(self, actor: Any, timeout_s: float) -> None:
        """A blocked ``BLMOVE`` of a product worker: returns once ready has an item (one waiter
        per item, as Redis serves blocked clients), or after ``timeout_s``."""
        if self.ready_len() > 0:
            return
        key = (actor.name, actor.incarnation, "dispatcher")
        future = self.world.loop.create_future()
        self.waiters[key] = future
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
            if self.waiters.get(key) is future:
                del self.waiters[key]

    def ready_len(self) -> int:
        return self.client.llen(self.keys.ready)

    def _after_event(self) -> None:
        if self.ready_dirty and (self.idle or self.waiters):
            n = self.ready_len()
            for key in list(self.idle)[:n]:
                actor, wake = self.idle.pop(key)
                actor.after(1, wake)
            for key in list(self.waiters)[:n]:
                future = self.waiters.pop(key)
                if not future.done():
                    future.set_result(None)
        self.ready_dirty = False
        self.checker.after_event()

    def error(self, actor: Any, exc: BaseException) -> None:
        where = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)).strip()
        self.ledger.violate(
            "ERR",
            None,
            f"unexpected {type(exc).__name__} in {actor.label if actor else 'sim'}: {exc}\n{where}",
            key=(type(exc).__name__, str(exc)[:80]),
        )

    # -- the end -----------------------------------------------------------------------------
    def drain_bound_ms(self) -> int:
        """I2: how long after the faults stop every task must be finished, from the settings."""
        s, sc = self.settings, self.scenario
        attempt = (
            min(s.processing_timeout_seconds, sc.llm_max_s())
            + s.lease_seconds / 3
            + s.lease_seconds
            + s.reaper_interval_seconds
            + s.retry_max_seconds
        )
        # Every charged attempt and every counted hand-back (I12: at most max_handbacks) runs once.
        per_task = (s.max_attempts + s.max_handbacks) * attempt
        slots = max(1, self.n_workers * sc.slots)
        queueing = self.ledger.nonterminal * per_task / slots
        reconcile = s.reconcile_grace_seconds + 2 * s.reconcile_interval_seconds
        breaker = 2 * s.breaker_open_seconds + 10  # an interval open, a probe, the gate's verdict wait
        # A host cut off from the LLM re-checks its link after its backoff (LlmGate: at most 60 s);
        # a provider's hold stored in the fleet's limiter lasts past the faults.
        host = 60 if self.world.fault_counts["llm_partition"] else 0
        hold = max(0, self.llm.hold_until - self.faults_end_ms) / 1000
        # A reaper restarted at the end gives its first verdict half a lease after it starts (I1).
        restart = sc.restart_s[1] + s.lease_seconds / 2
        return int((per_task + queueing + reconcile + breaker + host + hold + restart + 30) * 1000)

    def quiescent(self) -> bool:
        raise NotImplementedError

    def settings_with(self, **changes: Any) -> Settings:
        return replace(self.settings, **changes)
