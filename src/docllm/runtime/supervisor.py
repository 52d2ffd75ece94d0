"""``docllm worker --processes N``: what the parent process decides about its N worker processes.

The parent runs no worker itself. It starts N children (each an ordinary worker with an id of its
own), replaces one that dies unexpectedly after an exponential backoff, forwards a stop signal to
every child and SIGKILLs one still alive past the stop's deadline. Every decision is made in
``step``, on an injected clock and with an injected way to start a child, so the tests drive it
without processes or wall-clock waits; ``entrypoints/processes.py`` gives it real ones.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from docllm.domain.backoff import Backoff
from docllm.logs import log_fields
from docllm.runtime.exit_watchdog import EXIT_SECONDS
from docllm.runtime.service import LEAVE_SECONDS, LOOPS_END_SECONDS
from docllm.runtime.worker import RELEASE_SECONDS
from docllm.settings import Settings

log = logging.getLogger("docllm.supervisor")

# A child killed past its stop's deadline had this much more than its own bound.
KILL_MARGIN_SECONDS = 2.0
# A replacement's backoff: 1 s, 2 s, 4 s ... at most 30 s; reset once a child has lived this long.
RESPAWN_BASE_SECONDS, RESPAWN_CAP_SECONDS, STABLE_SECONDS = 1.0, 30.0, 60.0
# The longest the parent sleeps between two looks at its children.
TICK_SECONDS = 0.5


class Child(Protocol):
    """A started child process (``subprocess.Popen`` is one)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


Spawn = Callable[[int, str], Child]  # (slot number, worker id) -> the started child


def child_stop_seconds(settings: Settings) -> float:
    """How long after a SIGTERM a child may take before it is SIGKILLed: the worker's drain (the
    grace, then its releases), the registry's leave, the exit watchdog's two stages, and a margin."""
    release = min(settings.lease_seconds / 2, RELEASE_SECONDS)  # Worker.release_seconds
    drain = max(settings.shutdown_grace_seconds + release, LOOPS_END_SECONDS)
    return drain + LEAVE_SECONDS + 2 * EXIT_SECONDS + KILL_MARGIN_SECONDS


def describe_exit(code: int) -> str:
    """``Popen.returncode`` in words: negative is the signal that ended the process."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class Slot:
    number: int
    backoff: Backoff
    child: Child | None = None
    worker_id: str = ""
    generation: int = 0  # children started in this slot so far
    started_at: float = 0.0
    respawn_at: float = 0.0  # when the slot is empty: when to start its next child
    last_exit: str = ""
    exits: list[str] = field(default_factory=list)


class Supervisor:
    def __init__(
        self,
        processes: int,
        base_id: str,
        spawn: Spawn,
        clock: Callable[[], float],
        stop_seconds: float,
        on_exit: Callable[[int], None] = lambda pid: None,
    ):
        self.base_id, self.spawn, self.clock = base_id, spawn, clock
        self.stop_seconds, self.on_exit = stop_seconds, on_exit
        self.slots = [Slot(n, Backoff(RESPAWN_BASE_SECONDS, RESPAWN_CAP_SECONDS)) for n in range(1, processes + 1)]
        self.kill_at: float | None = None  # set by the first stop
        self.killed: list[str] = []  # worker ids SIGKILLed past the deadline

    # -- decisions -------------------------------------------------------------------------
    def start(self) -> None:
        now = self.clock()
        for slot in self.slots:
            self._start(slot, now)

    def step(self) -> float:
        """Look at every child once: note the exits, replace the dead (unless stopping), kill
        those past the stop's deadline. Returns how long to wait before the next step."""
        now = self.clock()
        for slot in self.slots:
            child = slot.child
            code = child.poll() if child is not None else None
            if child is not None and code is not None:
                self._exited(slot, child, code, now)
            if slot.child is None and not self.stopping and now >= slot.respawn_at:
                self._start(slot, now)
        if self.kill_at is not None and now >= self.kill_at:
            for slot in self.slots:
                if slot.child is not None and slot.worker_id not in self.killed:
                    log.warning(
                        "%s (pid %d) still running %.1fs after the stop: SIGKILL",
                        slot.worker_id,
                        slot.child.pid,
                        self.stop_seconds,
                    )
                    slot.child.kill()
                    self.killed.append(slot.worker_id)
        return self._next_wait(now)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Forward ``sig`` to every live child; the first stop sets the deadline past which a
        child is killed. A second signal is forwarded too (the children ignore repeats)."""
        if self.kill_at is None:
            self.kill_at = self.clock() + self.stop_seconds
            log.info(
                "%s: stopping %d worker processes (each is killed if still running after %.1fs)",
                signal.Signals(sig).name,
                self.alive,
                self.stop_seconds,
            )
        for slot in self.slots:
            if slot.child is not None and slot.child.poll() is None:
                slot.child.send_signal(sig)

    # -- state -----------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self.kill_at is not None

    @property
    def alive(self) -> int:
        return sum(1 for slot in self.slots if slot.child is not None)

    @property
    def done(self) -> bool:
        """Stopping and every child has exited (and been reaped)."""
        return self.stopping and self.alive == 0

    def health(self) -> tuple[bool, list[str]]:
        """Healthy when every slot has a child; otherwise the slots being replaced, named."""
        if self.stopping:  # children exit on purpose
            return True, []
        problems = [
            f"{slot.worker_id} is being replaced ({slot.last_exit})" for slot in list(self.slots) if slot.child is None
        ]
        return not problems, problems

    def require_all_alive(self) -> None:
        """``/readyz``'s check: raises naming the slots being replaced."""
        ok, problems = self.health()
        if not ok:
            raise RuntimeError("; ".join(problems))

    # -- the parts -------------------------------------------------------------------------
    def _start(self, slot: Slot, now: float) -> None:
        worker_id = f"{self.base_id}-{slot.number}" + (f".{slot.generation}" if slot.generation else "")
        slot.generation += 1
        slot.worker_id = worker_id
        try:
            child = self.spawn(slot.number, worker_id)
        except OSError as exc:
            slot.last_exit = f"could not start: {exc}"
            slot.respawn_at = now + slot.backoff.next()
            log.error("%s could not start (%s); next try in %.1fs", worker_id, exc, slot.respawn_at - now)
            return
        slot.child, slot.started_at = child, now
        log_fields(log, logging.INFO, f"{worker_id} started (pid {child.pid})", worker=worker_id, pid=child.pid)

    def _exited(self, slot: Slot, child: Child, code: int, now: float) -> None:
        slot.child, slot.last_exit = None, describe_exit(code)
        slot.exits.append(slot.last_exit)
        self.on_exit(child.pid)
        if self.stopping:
            log.info("%s (pid %d) stopped: %s", slot.worker_id, child.pid, slot.last_exit)
            return
        if now - slot.started_at >= STABLE_SECONDS:  # it ran a good while: not a crash loop
            slot.backoff.reset()
        slot.respawn_at = now + slot.backoff.next()
        delay = slot.respawn_at - now
        message = f"{slot.worker_id} (pid {child.pid}) died unexpectedly: {slot.last_exit}; replaced in {delay:.1f}s"
        log_fields(log, logging.WARNING, message, worker=slot.worker_id, pid=child.pid, exit=code, replace_in=delay)

    def _next_wait(self, now: float) -> float:
        wakes = [TICK_SECONDS]
        if self.kill_at is not None and not self.killed:
            wakes.append(self.kill_at - now)
        if not self.stopping:
            wakes += [slot.respawn_at - now for slot in self.slots if slot.child is None]
        return max(0.0, min(wakes))
