"""The simulation's asyncio: an event loop on the world's virtual time, and the port-call runner
the runtime uses in it.

The product's runtime (``docllm.runtime``: the worker's dispatcher, attempts and heartbeats, the
reaper and reconciler loops) runs here unchanged; only time, the network and faults are simulated
(the FoundationDB rule). ``VirtualLoop`` never blocks: its selector watches no file descriptor,
and the world moves its clock to the next timer (``World.run``). Timers that fall due at the same
millisecond run in the order they were scheduled, so a seed gives the same run event for event.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import math
import selectors
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sim.fault_injection import Crash

if TYPE_CHECKING:  # pragma: no cover
    from sim.world import Actor, World

T = TypeVar("T")

# The actor whose code is running: tasks it creates belong to it and die with it.
current_actor: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("sim_actor", default=None)


class Killed(asyncio.CancelledError):
    """The process died: its coroutines unwind without running anything more."""


class _NoFiles(Mapping[Any, selectors.SelectorKey]):
    def __init__(self, keys: dict[Any, selectors.SelectorKey]):
        self._keys = keys

    def __getitem__(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys[fileobj]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class VirtualSelector(selectors.BaseSelector):
    """Accepts the loop's own wake-up pipe and never reports anything ready: nothing outside the
    simulation can wake it, and it never waits (the world advances time instead)."""

    def __init__(self) -> None:
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, fileobj if isinstance(fileobj, int) else fileobj.fileno(), events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return _NoFiles(self._keys)

    def close(self) -> None:
        self._keys.clear()


class _Timer(asyncio.TimerHandle):
    """A timer on a whole millisecond, ordered by (time, scheduling order): ties run first come,
    first served."""

    __slots__ = ("_seq", "_ms")

    def __init__(
        self,
        ms: int,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context | None,
        seq: int,
    ):
        super().__init__(ms / 1000.0, callback, args, loop, context)
        self._seq, self._ms = seq, ms

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _Timer):
            return (self._when, self._seq) < (other._when, other._seq)
        return super().__lt__(other)  # type: ignore[operator]


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, world: World):
        self.world = world
        super().__init__(VirtualSelector())
        self._clock_resolution = 1e-9  # timers sit on whole ms, and time() is the same ms / 1000
        self._seq = itertools.count()
        self.set_task_factory(_actor_task)

    def time(self) -> float:
        return self.world.now / 1000.0

    def call_at(
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,  # type: ignore[override]
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        # Rounded up to the next millisecond: a timer never fires before its time, so code that
        # waits "until t" and checks ``loop.time() >= t`` afterwards cannot spin on a rounding error.
        return self.call_at_ms(math.ceil(when * 1000), callback, *args, context=context)

    def call_at_ms(
        self, ms: int, callback: Callable[..., object], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.TimerHandle:
        self._check_closed()
        timer = _Timer(ms, callback, args, self, context, next(self._seq))
        heapq.heappush(self._scheduled, timer)  # type: ignore[attr-defined]
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    # -- what the world drives ---------------------------------------------------------------
    def next_ms(self) -> int | None:
        """When the next callback is due (ms of world time), None when nothing is scheduled."""
        if self._ready:  # type: ignore[attr-defined]
            return self.world.now
        scheduled = self._scheduled  # type: ignore[attr-defined]
        while scheduled and scheduled[0]._cancelled:
            heapq.heappop(scheduled)._scheduled = False
            self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
        if not scheduled:
            return None
        return max(self.world.now, scheduled[0]._ms)

    def turn(self) -> None:
        """Run what is due now (the world has moved its clock to ``next_ms``), as the running loop."""
        outer = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        try:
            self._run_once()  # type: ignore[attr-defined]
        finally:
            asyncio.events._set_running_loop(outer)


def _actor_task(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    task = asyncio.Task(coro, loop=loop, **kwargs)
    context = kwargs.get("context")
    actor = context.run(current_actor.get) if context is not None else current_actor.get()
    if actor is not None:
        actor.tasks[task] = None
        task.add_done_callback(lambda done: actor.tasks.pop(done, None))
    return task


class SimPortCalls:
    """``docllm.runtime.port_calls.PortCalls`` in the simulation: each call takes a simulated
    round trip, then runs inline through the actor's crash budget. A dead process makes no call;
    a paused one makes its next call when the pause ends."""

    def __init__(self, actor: Any, ready_wait: Callable[[Any, float], Any]):
        self.actor, self.incarnation, self.ready_wait = actor, actor.incarnation, ready_wait
        self.busy = 0  # calls run inline: none is ever left blocked

    def close(self) -> None:
        pass

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        await self._alive(self.actor.sys.op_latency() / 1000.0)
        try:
            result = fn(*args)
        except Crash as crash:
            self.actor.crash(f"crash {crash}")
            raise Killed() from None
        owed = self.actor.budget.due()
        if owed:
            self.actor.crash(f"crash {owed}")
            raise Killed()
        return result

    claim = call  # no queue of calls to go ahead of: each runs inline

    async def wait_claim(self, proc: Any, timeout_s: float) -> list[Any]:
        """The blocking wait of ``stage``: until ready has a payload (the system says when), then
        one non-blocking stage and lease through the crash budget."""
        await self._alive(0)
        await self.ready_wait(self.actor, timeout_s)
        return await self.call(proc.wait_claim, 0)

    async def _alive(self, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        world = self.actor.world
        while self.actor.alive and self.actor.incarnation == self.incarnation and self.actor.paused_until > world.now:
            # A second at a time: the end of the faults ends a pause early (System.stop_faults).
            await asyncio.sleep(min(self.actor.paused_until - world.now, 1_000) / 1000.0)
        if not self.actor.alive or self.actor.incarnation != self.incarnation:
            raise Killed()


class VirtualTime:
    """Virtual time for code that runs to an end (the runtime's unit tests): a ``VirtualLoop`` that
    runs one coroutine until it returns, and ``now_ms`` (a ``Clock``) that follows the loop's time,
    for the adapters that stand for the authorities (Redis's clock). Nothing waits on a wall clock:
    the loop jumps to its next timer, so a test that "waits" 30 s takes milliseconds and a loaded
    machine cannot make it late. It is the loop's world (the loop reads only ``now``) and steps it
    as ``World.step`` does; ``after_turn`` hooks run after every turn, as ``World.after_event``."""

    def __init__(self, limit_s: float = 3600.0, turns_per_instant: int = 20_000):
        self.now = 0  # ms of virtual time
        self.loop = VirtualLoop(cast("World", self))
        self.limit_ms = int(limit_s * 1000)
        # More turns of the loop than this without its time moving is a livelock (code that goes
        # round without ever waiting): on virtual time it would never reach ``limit_s``.
        self.turns_per_instant = turns_per_instant
        self.after_turn: list[Callable[[], None]] = []
        self.errors: list[BaseException] = []  # what the loop reported (a callback's error...)
        self.loop.set_exception_handler(self._loop_error)

    def now_ms(self) -> int:
        return self.now

    def time(self) -> float:
        """The loop's time (seconds), also once it is closed."""
        return self.now / 1000.0

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` on the loop until it ends and return its result (or raise its error). An
        AssertionError when it is still running ``limit_s`` of virtual time later, waits for
        something that nothing scheduled can bring, or is in a livelock (``turns_per_instant``); an
        error the loop reported meanwhile is raised too."""
        task = self.loop.create_task(main)
        instant, turns = self.now, 0

        def stop() -> bool:
            nonlocal instant, turns
            if task.done():
                return True
            if self.now != instant:
                instant, turns = self.now, 0
            turns += 1
            return turns > self.turns_per_instant

        self._run(stop, self.now + self.limit_ms)
        if not task.done():
            if turns > self.turns_per_instant:
                why = f"a livelock: {turns} turns of the loop at t={self.now} ms without its time moving"
            elif self.loop.next_ms() is None:
                why = "waits for something nothing scheduled brings (no timer left)"
            else:
                why = f"still running after {self.limit_ms / 1000:g} s of virtual time"
            task.cancel()  # its ``finally`` blocks run on the loop
            unwinding = itertools.count()
            self._run(lambda: task.done() or next(unwinding) >= self.turns_per_instant, self.now + self.limit_ms)
            raise AssertionError(why)
        if self.errors and task.exception() is None:
            raise self.errors[0]
        return task.result()

    def _run(self, stop: Callable[[], bool], until_ms: int) -> None:
        while not stop():
            t = self.loop.next_ms()
            if t is None or t > until_ms:
                return
            self.now = max(self.now, t)
            self.loop.turn()
            for hook in self.after_turn:
                hook()

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.errors.append(context.get("exception") or RuntimeError(context.get("message", "asyncio error")))

    def close(self) -> None:
        """Cancel what still runs, let it unwind, and close the loop."""
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        unwinding = itertools.count()
        self._run(lambda: all(t.done() for t in tasks) or next(unwinding) >= self.turns_per_instant, self.now)
        self.loop.close()
