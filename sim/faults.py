"""Faults: what can go wrong, when it does, and Redis data loss.

A scenario names how many faults of each kind a run gets on average (optionally with the part of
the fault phase they fall in: ``(mean, from, to)`` as fractions); ``FaultPlan`` draws their times
(seeded) and fires them. A fault is one of:

- a crash of an actor at a boundary between two port calls (its crash budget is armed to let
  ``k`` more calls through), at a named crash point (``worker:after_claim``...), or at once;
- a GC-like pause of a worker or reaper, a worker that stops heartbeating but keeps working;
- Redis or the database unavailable for a while, a Redis restart (its script cache is lost),
  Redis data loss (FLUSHALL, or a failover that restores a snapshot taken a few seconds
  earlier: the last writes are gone);
- duplicate payloads, malformed payloads and payloads naming no task, SIGTERM of a worker;
- an operator's ``docllm cancel`` of a task that is pending or running (not a fault, but an
  action from outside that the invariants must survive).
- an outage of the LLM provider, from 20 s to 2 hours (until the faults stop, at most).
- the faults of issue 22 ("whose fault it is"; the product's design only): one worker host cut
  off from the LLM while the others are served (``llm_partition``, 20 s to 4 min); a batch of 3
  to 8 poison documents submitted together that all time out or all get a 500 while the
  provider's check passes (``poison_batch``); a 429 whose Retry-After is longer than
  PROCESSING_TIMEOUT_SECONDS (``provider_hold``, through the fleet's RateGate: only where the
  scenario sets DOCLLM_LLM_RPM); answers whose headers and usage reports carry numbers beyond
  belief (``garbage_hints``, 20 to 90 s); one host whose reads of the Redis server's TIME flap
  between the true clock and one 15 s, 1 min or 1 h off, so it reports steps back and forth at
  every resync (``clock_step_flap``, 30 s to 3 min).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sim.llm import BATCH_KINDS

if TYPE_CHECKING:  # pragma: no cover
    from sim.system import System

BLAME_KINDS = ("llm_partition", "poison_batch", "provider_hold", "garbage_hints", "clock_step_flap")
CRASH_KINDS = ("crash_worker", "kill_llm", "crash_reaper", "crash_reconciler", "crash_producer", "crash_operator")
KINDS = CRASH_KINDS + (
    "pause",
    "no_heartbeat",
    "redis_down",
    "db_down",
    "redis_restart",
    "redis_flush",
    "redis_failover",
    "duplicate",
    "malformed",
    "sigterm",
    "clock_back",
    "clock_forward",
    "lost_reply",
    "cancel",
    "llm_down",
    *BLAME_KINDS,
)
POINTS = (
    "worker:after_claim",
    "worker:after_stage",
    "worker:before_start",
    "worker:after_llm",
    "worker:after_commit",
    "reaper:after_reclaim",
)
# One of several LLM deployments down (sim/deployments.py): DEPLOYMENT_DOWN + its name. Not in
# KINDS: the random scenario has one provider (and its draws of KINDS are the seeds' replays).
DEPLOYMENT_DOWN = "deployment_down:"
DEPLOYMENT_OUTAGE_S = (300.0, 720.0)
MALFORMED = (
    "not json {{{",
    '{"task_name": "no id"}',
    '{"task_id": "abc"}',
    "[1, 2, 3]",
    '{"task_id": -4}',
    '{"task_id": 1.5}',
    "caf\u00e9 \u4e2d\u6587 not json",
)


def poisson(rng: random.Random, mean: float) -> int:
    if mean <= 0:
        return 0
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def snapshot(client: Any) -> list[tuple[bytes, str, Any]]:
    """Every key's value, read by type (what a replica has)."""
    out: list[tuple[bytes, str, Any]] = []
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        if kind == b"list":
            out.append((key, "list", client.lrange(key, 0, -1)))
        elif kind == b"hash":
            out.append((key, "hash", client.hgetall(key)))
        elif kind == b"zset":
            out.append((key, "zset", client.zrange(key, 0, -1, withscores=True)))
        elif kind == b"string":
            out.append((key, "string", client.get(key)))
        elif kind == b"set":
            out.append((key, "set", sorted(client.smembers(key))))
    return out


def restore(client: Any, snap: list[tuple[bytes, str, Any]]) -> None:
    client.flushall()
    for key, kind, value in snap:
        if kind == "list" and value:
            client.rpush(key, *value)
        elif kind == "hash" and value:
            client.hset(key, mapping=value)
        elif kind == "zset" and value:
            client.zadd(key, {member: score for member, score in value})
        elif kind == "string":
            client.set(key, value)
        elif kind == "set" and value:
            client.sadd(key, *value)


class FaultPlan:
    def __init__(self, system: System):
        self.sys = system
        self.world = system.world
        self.rng = self.world.rng_for("fault-fire")
        # What each kind does (``worker:``/``reaper:`` crash points and redis_failover, which
        # schedule() sets up from a snapshot, are not here).
        self.actions: dict[str, Callable[[str], None]] = {
            "crash_worker": self._crash_a_worker,
            "kill_llm": self._kill_a_worker_in_a_call,
            "crash_reaper": self._crash_a_chore,
            "crash_reconciler": self._crash_a_chore,
            "crash_producer": self._crash_a_chore,
            "crash_operator": self._crash_a_chore,
            "pause": self._pause_an_actor,
            "no_heartbeat": self._stop_a_heartbeat,
            "redis_down": self._take_a_service_down,
            "db_down": self._take_a_service_down,
            "llm_down": self._take_the_llm_down,
            "redis_restart": self._restart_redis,
            "clock_back": self._step_the_redis_clock,
            "clock_forward": self._step_the_redis_clock,
            "redis_flush": self._flush_redis,
            "duplicate": self._push_a_duplicate,
            "malformed": self._push_a_bad_payload,
            "lost_reply": self._lose_a_reply,
            "cancel": self._cancel_a_task,
            "sigterm": self._sigterm_a_worker,
            "llm_partition": self._cut_a_host_off_the_llm,
            "poison_batch": self._submit_a_poison_batch,
            "provider_hold": self._hold_the_provider,
            "garbage_hints": self._garble_the_llm_hints,
            "clock_step_flap": self._flap_a_hosts_clock,
        }

    def schedule(self) -> None:
        sc, world = self.sys.scenario, self.world
        draw = world.rng_for("fault-plan")
        end = int(sc.faults_s * 1000)
        for kind, spec in sorted(sc.faults.items()):
            mean, start, stop = spec if isinstance(spec, tuple) else (spec, 0.03, 0.97)
            for _ in range(poisson(draw, mean)):
                at = int(draw.uniform(start, stop) * end)
                if kind == "redis_failover":
                    lag = int(draw.uniform(500, 5_000))
                    worker_id: dict[str, Any] = {}
                    world.at(at - lag, lambda h=worker_id: h.update(snap=snapshot(self.sys.client)))
                    world.at(at, lambda h=worker_id, lag=lag: self.sys.failover(h["snap"], lag))
                else:
                    world.at(at, lambda k=kind: self.fire(k))

    def fire(self, kind: str) -> None:
        if not self.sys.faults_active:
            return
        if kind.startswith(("worker:", "reaper:")):
            return self._arm_point(kind)
        if kind in BLAME_KINDS and self.sys.design != "product":
            # Issue 22's faults hit the product's LLM boundary and clocks: the original design has
            # neither a per-host view of the LLM nor a fleet limiter, so they are not modelled there.
            return
        if kind.startswith(DEPLOYMENT_DOWN):  # one of several deployments: the product's routing only
            deploy = getattr(self.sys, "deploy", None)
            if deploy is not None:
                self._take_a_deployment_down(deploy, kind)
            return
        action = self.actions.get(kind)
        if action is None:
            raise ValueError(f"unknown fault kind {kind!r}")
        action(kind)

    # Each fault's action takes its kind (some serve two kinds, most name it in the ledger). The
    # random draws of each, their number and order, are the seeds' replays: change none of them.

    def _arm_point(self, kind: str) -> None:
        s = self.sys
        actor = self._pick(s.actors_of(kind.split(":")[0]))
        if actor is not None:
            s.ledger.arm(f"arm {kind} on {actor.label}")
            s.arm_point(actor, kind)

    def _crash_a_worker(self, kind: str) -> None:
        self._crash(self._pick(self.sys.actors_of("worker")), self.rng.randint(0, 5))

    def _kill_a_worker_in_a_call(self, kind: str) -> None:
        busy = [w for w in self.sys.actors_of("worker") if getattr(w, "runs", None)]
        self._crash(self._pick(busy), None)

    def _crash_a_chore(self, kind: str) -> None:
        """A reaper, reconciler, producer or operator (``crash_<role>``)."""
        self._crash(self._pick(self.sys.actors_of(kind.split("_")[1])), self.rng.randint(0, 4))

    def _pause_an_actor(self, kind: str) -> None:
        s = self.sys
        actor = self._pick(s.actors_of("worker") + s.actors_of("reaper"))
        if actor is not None and actor.paused_until <= self.world.now:
            ms = int(self.rng.uniform(5_000, 60_000))
            s.ledger.fault(kind, f"{actor.label} pauses for {ms / 1000:.1f}s (GC-like: it does nothing)")
            actor.pause(ms)

    def _stop_a_heartbeat(self, kind: str) -> None:
        s = self.sys
        actor = self._pick(s.actors_of("worker"))
        if actor is not None:
            ms = int(self.rng.uniform(40_000, 100_000))
            s.ledger.fault(kind, f"{actor.label} stops heartbeating for {ms / 1000:.0f}s (alive)")
            actor.no_beat_until = actor.last_no_beat_end = self.world.now + ms

    def _take_a_service_down(self, kind: str) -> None:
        """``redis_down`` or ``db_down``."""
        service = kind.split("_")[0]
        ms = int(self.rng.uniform(2_000, 20_000))
        self.sys.ledger.fault(kind, f"{service} unavailable for {ms / 1000:.1f}s")
        self.sys.outage(service, ms)

    def _take_the_llm_down(self, kind: str) -> None:
        ms = int(self.rng.uniform(20_000, 7_200_000))
        self.sys.ledger.fault(kind, f"the LLM provider is down for {ms / 60_000:.1f} min (every call fails)")
        self.sys.llm_outage(ms)

    def _take_a_deployment_down(self, deploy: Any, kind: str) -> None:
        name = kind[len(DEPLOYMENT_DOWN) :]
        ms = int(self.rng.uniform(*DEPLOYMENT_OUTAGE_S) * 1000)
        self.sys.ledger.fault(kind, f"LLM deployment {name} is down for {ms / 60_000:.1f} min (every call to it fails)")
        deploy.down(name, ms)

    def _restart_redis(self, kind: str) -> None:
        s = self.sys
        ms = int(self.rng.uniform(1_000, 4_000))
        s.ledger.fault(kind, f"redis restarts (data kept, script cache lost), down {ms / 1000:.1f}s")
        s.client.script_flush()
        s.outage("redis", ms)

    def _step_the_redis_clock(self, kind: str) -> None:
        """``clock_back`` or ``clock_forward``: a minute or an hour."""
        ms = self.rng.choice((60_000, 3_600_000))
        way = "back" if kind == "clock_back" else "forward"
        self.sys.ledger.fault(kind, f"the Redis server's clock steps {way} {ms / 60_000:.0f} min")
        self.sys.step_clock(-ms if kind == "clock_back" else ms)

    def _flush_redis(self, kind: str) -> None:
        self.sys.ledger.fault(kind, "redis restarts without persistence: FLUSHALL")
        self.sys.data_loss(None, "redis restarted without AOF: every key lost")

    def _push_a_duplicate(self, kind: str) -> None:
        s = self.sys
        task = self._pick([b for b in s.ledger.books.values()])
        if task is not None:
            s.ledger.fault(kind, f"duplicate payload of task {task.task_id}", task.task_id)
            s.push_raw(json.dumps({"task_id": task.task_id, "task_name": task.name}, ensure_ascii=False))

    def _push_a_bad_payload(self, kind: str) -> None:
        """Malformed (numbered after the first, so each is its own), or naming no task (30%)."""
        s, r = self.sys, self.rng
        n = self.world.fault_counts["malformed"]
        if r.random() < 0.3:
            raw, why = json.dumps({"task_id": 900_000 + n, "task_name": "ghost.md"}), "unknown task"
        else:
            base = r.choice(MALFORMED)
            raw, why = (base if n == 0 else f"{base} #{n}"), "malformed"
        s.ledger.fault(kind, f"{why} payload {raw[:40]!r}")
        s.ledger.bad_payload(raw, why)
        s.push_raw(raw)

    def _lose_a_reply(self, kind: str) -> None:
        """The write lands, its reply never comes back (issue 13 item 1)."""
        s = self.sys
        actor = self._pick(s.actors_of("worker") + s.actors_of("reaper") + s.actors_of("reconciler"))
        if actor is not None:
            s.ledger.arm(f"arm {actor.label}: the reply of its next database write is lost")
            actor.lost_replies = getattr(actor, "lost_replies", 0) + 1

    def _cancel_a_task(self, kind: str) -> None:
        s = self.sys
        task = self._pick([b for b in s.ledger.books.values() if b.status not in ("success", "failed")])
        if task is not None:
            s.ledger.fault(kind, f"the operator cancels task {task.task_id} ({task.status})", task.task_id)
            s.cancel(task.task_id)

    def _sigterm_a_worker(self, kind: str) -> None:
        s = self.sys
        actor = self._pick([w for w in s.actors_of("worker") if not getattr(w, "stopping", False)])
        if actor is not None:
            s.ledger.fault(kind, f"SIGTERM {actor.label}")
            actor.sigterm()

    # -- the faults of issue 22 (the product only) --------------------------------------------

    def _cut_a_host_off_the_llm(self, kind: str) -> None:
        s = self.sys
        actor = self._pick(s.actors_of("worker"))
        if actor is not None:
            ms = int(self.rng.uniform(20_000, 240_000))
            s.ledger.fault(kind, f"{actor.name} is cut off from the LLM for {ms / 1000:.0f}s (others are served)")
            s.llm_partition(actor.name, ms)

    def _submit_a_poison_batch(self, kind: str) -> None:
        n, how = self.rng.randint(3, 8), self.rng.choice(BATCH_KINDS)
        self.sys.ledger.fault(kind, f"a batch of {n} poison documents that all fail the same way ({how})")
        self.sys.poison_batch(how, n)

    def _hold_the_provider(self, kind: str) -> None:
        s = self.sys
        if s.llm.gate is None:  # no fleet limiter to hold: the scenario sets no DOCLLM_LLM_RPM
            return
        limit = s.settings.processing_timeout_seconds
        hold = round(self.rng.uniform(1.1 * limit, 3 * limit))
        s.ledger.fault(kind, f"the provider's next answer is a 429 with Retry-After {hold}s (> {limit:g}s)")
        s.llm.hold_next_s = float(hold)

    def _garble_the_llm_hints(self, kind: str) -> None:
        s = self.sys
        ms = int(self.rng.uniform(20_000, 90_000))
        s.ledger.fault(kind, f"for {ms / 1000:.0f}s the LLM's headers and usage carry numbers beyond belief")
        s.llm.garbage_until = max(s.llm.garbage_until, self.world.now + ms)

    def _flap_a_hosts_clock(self, kind: str) -> None:
        s, r = self.sys, self.rng
        actor = self._pick(s.actors_of("worker") + s.actors_of("reaper"))
        if actor is not None and actor.name not in s.flaps:
            ms, off = int(r.uniform(30_000, 180_000)), r.choice((15_000, 60_000, 3_600_000))
            s.ledger.fault(
                kind, f"{actor.name}'s reads of the Redis TIME flap by {off / 1000:.0f}s for {ms / 1000:.0f}s"
            )
            s.flaps[actor.name] = (self.world.now + ms, off)

    def _pick(self, items: list[Any]) -> Any:
        items = [a for a in items if getattr(a, "alive", True)]
        return self.rng.choice(items) if items else None

    def _crash(self, actor: Any, calls: int | None) -> None:
        if actor is None:
            return
        if calls is None:
            actor.crash("killed (SIGKILL)")
            return
        self.sys.ledger.arm(f"arm {actor.label}: crash after {calls} more port call(s)")
        actor.budget.arm(calls)
