"""The event loop: virtual time in ms, actors and the trace, on ``sim.aio.VirtualLoop``.

Plain events (``at``, ``after``) and the product runtime's coroutines share one asyncio loop whose
clock is the world's. Nothing here sleeps or reads a wall clock. ``now`` is the true time of the run in ms since its
start; every clock an actor or a service reads (the Redis server's included) is derived from it
(``sim.clocks``). Randomness comes from ``rng_for(purpose)``, seeded from the run's seed, so the
same seed gives the same run event for event.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from sim.aio import Killed, VirtualLoop, current_actor
from sim.fault_injection import Crash, CrashBudget

EPOCH_MS = 1_700_000_000_000  # true time of the start of every run (2023-11-14 22:13:20 UTC)


class SimBudget(CrashBudget):
    """A CrashBudget that can also crash right before or right after a named port call, and
    counts the calls that went through (the reaper-cost check of D8 reads ``calls``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self._before: tuple[str, ...] | None = None
        self._after: tuple[str, ...] | None = None
        self._hit: str | None = None

    def arm_at(self, call: str | tuple[str, ...], after: bool) -> None:
        """Crash before (or after) the next call named ``call`` ("repo.commit"), or any of several."""
        calls = (call,) if isinstance(call, str) else call
        if after:
            self._after = calls
        else:
            self._before = calls

    def tick(self, what: str) -> None:
        if self._hit is not None:
            hit, self._hit = self._hit, None
            self.log.append(f"crash after {hit}")
            raise Crash(f"after {hit}")
        if self._before is not None and what in self._before:
            self._before = None
            self.log.append(f"crash before {what}")
            raise Crash(f"before {what}")
        super().tick(what)
        self.calls += 1
        if self._after is not None and what in self._after:
            self._after, self._hit = None, what

    def due(self) -> str | None:
        """A crash that is owed now, at the end of a step: its last call was the one armed."""
        if self._hit is not None:
            hit, self._hit = self._hit, None
            return f"after {hit}"
        if self.remaining == 0:
            self.remaining = None
            return "at the end of its step"
        return None

    def disarm(self) -> None:
        super().disarm()
        self._before = self._after = self._hit = None


class Windows:
    """Intervals of true time during which something could not make progress (Redis down, no
    reaper alive...). The invariants extend their bounds by the overlap with these."""

    def __init__(self) -> None:
        self._closed: dict[str, list[tuple[int, int]]] = {}
        self._open: dict[str, int] = {}

    def open(self, kind: str, at: int) -> None:
        self._open.setdefault(kind, at)

    def close(self, kind: str, at: int, extra: int = 0) -> None:
        start = self._open.pop(kind, None)
        if start is not None:
            self._closed.setdefault(kind, []).append((start, at + extra))

    def add(self, kind: str, start: int, end: int) -> None:
        self._closed.setdefault(kind, []).append((start, end))

    def overlap(self, kinds: tuple[str, ...], a: int, b: int) -> int:
        """Milliseconds of [a, b) covered by any window of ``kinds`` (open ones run to b)."""
        spans = [(max(s, a), min(e, b)) for k in kinds for s, e in self._closed.get(k, ())]
        spans += [(max(s, a), b) for k, s in self._open.items() if k in kinds]
        spans = sorted((s, e) for s, e in spans if e > s)
        total, cur_s, cur_e = 0, None, None
        for s, e in spans:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    total += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        if cur_e is not None:
            total += cur_e - cur_s
        return total


class World:
    def __init__(self, seed: int):
        self.seed = seed
        self.now = 0
        self.loop = VirtualLoop(self)
        self.loop.set_exception_handler(self._loop_error)
        self.trace: list[tuple[int, str, str, int | None, str]] = []  # (t, who, kind, task, text)
        self.events_run = 0
        self.current: Actor | None = None
        self.after_event: list[Callable[[], None]] = []
        self.on_advance: list[Callable[[int], None]] = []
        self.windows = Windows()
        self.live: dict[str, int] = {}  # kind -> actors alive and not paused
        self.fault_counts: Counter[str] = Counter()  # faults that happened (armed crashes: when they fire)
        self.on_error: Callable[[Actor | None, BaseException], None] | None = None

    def rng_for(self, purpose: str) -> random.Random:
        """A generator of its own per purpose: adding draws to one never shifts another."""
        return random.Random(f"{self.seed}:{purpose}")

    # -- scheduling --------------------------------------------------------------------------
    def at(self, t: int, fn: Callable[[], None], actor: Actor | None = None) -> None:
        inc = actor.incarnation if actor is not None else 0
        self.loop.call_at_ms(max(int(t), self.now), self._event, fn, actor, inc)

    def after(self, delay_ms: float, fn: Callable[[], None], actor: Actor | None = None) -> None:
        self.at(self.now + int(delay_ms), fn, actor)

    def log(self, kind: str, text: str, task: int | None = None, who: str | None = None) -> None:
        if who is None:
            actor = self.current or current_actor.get()
            who = actor.label if actor is not None else "sim"
        self.trace.append((self.now, who, kind, task, text))

    def _event(self, fn: Callable[[], None], actor: Actor | None, inc: int) -> None:
        if actor is not None:
            if not actor.alive or actor.incarnation != inc:
                return
            if actor.paused_until > self.now:
                self.at(actor.paused_until, fn, actor)
                return
        self.current = actor
        token = current_actor.set(actor)
        try:
            fn()
            if actor is not None and actor.alive and actor.incarnation == inc:
                owed = actor.budget.due()
                if owed:
                    actor.crash(f"crash {owed}")
        except Crash as crash:
            assert actor is not None, "a crash outside an actor"
            actor.crash(f"crash {crash}")
        except Killed:
            pass
        except Exception as exc:  # a bug of the product or of the harness: reported, not fatal
            if self.on_error is None:
                raise
            self.on_error(actor, exc)
        finally:
            current_actor.reset(token)
            self.current = None

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        exc = context.get("exception") or RuntimeError(context.get("message", "asyncio error"))
        if self.on_error is None:
            raise exc
        self.on_error(None, exc)

    def advance(self, t: int) -> None:
        if t > self.now:
            self.now = t
            for advance in self.on_advance:
                advance(t)

    # -- running -----------------------------------------------------------------------------
    def step(self) -> bool:
        """Run what is due next (moving the clock to it); False when nothing is scheduled."""
        t = self.loop.next_ms()
        if t is None:
            return False
        self.advance(t)
        self.loop.turn()
        self.events_run += 1
        for hook in self.after_event:
            hook()
        return True

    def run(self, stop: Callable[[], bool], until: int) -> bool:
        """Run events until ``stop()`` (True) or the next event is later than ``until`` (False)."""
        while True:
            t = self.loop.next_ms()
            if t is None or t > until:
                break
            self.step()
            if stop():
                return True
        if self.now < until and not stop():
            self.advance(until)
        return stop()

    def close(self) -> None:
        """Drop what is still scheduled (the run is over) and close the loop."""
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
        self.loop._ready.clear()  # type: ignore[attr-defined]
        self.loop._scheduled.clear()  # type: ignore[attr-defined]
        self.loop.close()

    # -- who is alive ------------------------------------------------------------------------
    def set_live(self, kind: str, delta: int) -> None:
        before = self.live.get(kind, 0)
        self.live[kind] = before + delta
        if before > 0 and before + delta == 0:
            self.windows.open(f"no_{kind}", self.now)
        elif before == 0 and before + delta > 0:
            self.windows.close(f"no_{kind}", self.now)


class Actor:
    """A process of the simulation: it crashes (losing every local state), restarts under a new
    incarnation, and can be paused (a GC pause: its events wait until the pause ends)."""

    kind = "actor"

    def __init__(self, world: World, name: str):
        self.world, self.name = world, name
        self.incarnation = 0
        self.alive = False
        self.paused_until = 0
        self.last_pause_end = 0
        self.budget = SimBudget()
        self.restart_delay_ms: Callable[[], int] = lambda: 5_000
        self.restarts = True
        # Coroutines of this incarnation, in creation order (sim.aio): they die with it.
        self.tasks: dict[asyncio.Task, None] = {}

    @property
    def label(self) -> str:
        return f"{self.name}#{self.incarnation}"

    def boot(self) -> None:
        self.incarnation += 1
        self.alive = True
        self.budget = SimBudget()
        self.world.set_live(self.kind, +1)
        self.world.log("life", "started", who=self.label)
        self.start()

    def start(self) -> None:
        """Schedule the first events of a fresh process."""

    def after(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self.world.after(delay_ms, fn, self)

    def spawn(self, coro: Any, name: str | None = None) -> asyncio.Task:
        """Run a coroutine as part of this process: it and every task it creates die with it."""
        token = current_actor.set(self)
        try:
            task = self.world.loop.create_task(coro, name=name)
        finally:
            current_actor.reset(token)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None and self.world.on_error is not None:
            self.world.on_error(self, task.exception())  # type: ignore[arg-type]

    def crash(self, why: str, count: bool = True) -> None:
        if not self.alive:
            return
        if count:
            self.world.fault_counts["crash"] += 1
        self.world.log("crash", f"CRASH {why}", who=self.label)
        self.stop_process()
        if self.restarts:
            self.world.after(self.restart_delay_ms(), self._restart)

    def exit(self, why: str, restart_after_ms: int | None) -> None:
        """A clean exit (after SIGTERM); a new container starts later."""
        if not self.alive:
            return
        self.world.log("life", f"exited: {why}", who=self.label)
        self.stop_process()
        if restart_after_ms is not None:
            self.world.after(restart_after_ms, self._restart)

    def stop_process(self) -> None:
        self.alive = False
        if self.paused_until <= self.world.now:
            self.world.set_live(self.kind, -1)
        self.paused_until = 0
        self.budget.disarm()
        tasks, self.tasks = self.tasks, {}
        for task in tasks:
            task.cancel()
        self.on_stop()

    def on_stop(self) -> None:
        """Forget local state; report what the process held to the bookkeeping."""

    def _restart(self) -> None:
        if not self.alive:
            self.boot()

    def pause(self, ms: int) -> None:
        if not self.alive or self.paused_until > self.world.now:
            return
        self.paused_until = self.world.now + ms
        self.last_pause_end = self.paused_until
        self.world.set_live(self.kind, -1)
        inc = self.incarnation

        def resume() -> None:
            if self.alive and self.incarnation == inc and self.paused_until <= self.world.now:
                self.world.set_live(self.kind, +1)

        self.world.at(self.paused_until, resume)
