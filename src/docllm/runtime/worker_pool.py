"""The worker: ``concurrency`` slots, each claiming and running one attempt at a time.

An attempt runs its review in a thread of its own while the slot heartbeats every lease/3,
abandons the attempt past PROCESSING_TIMEOUT_SECONDS (I8), stops it on a lost lease (commits
nothing), and on shutdown releases it to ready once the grace period is over (D11).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from docllm.domain.errors import ConfigurationError, Unavailable
from docllm.domain.model import Attempt
from docllm.domain.ports import TaskQueue
from docllm.domain.services.attempts import TaskProcessor
from docllm.domain.services.outcome import Outcome
from docllm.runtime.config_gate import ConfigGate
from docllm.runtime.outage import Outage

log = logging.getLogger("docllm.worker")


class WorkerPool:
    def __init__(self, processor: Callable[[], TaskProcessor], queue: TaskQueue, gate: ConfigGate,
                 concurrency: int, idle_wait_seconds: float = 1.0):
        self.make_processor, self.queue, self.gate = processor, queue, gate
        self.concurrency, self.idle_wait = concurrency, idle_wait_seconds
        self.stopping = threading.Event()
        self.drain_deadline: float | None = None
        self.outage = Outage("redis/database", log)
        self.in_flight = 0
        self._count_lock = threading.Lock()
        self.threads = [threading.Thread(target=self._slot, name=f"slot-{i}", daemon=True)
                        for i in range(concurrency)]
        self.last_beat = time.monotonic()

    def start(self) -> WorkerPool:
        for t in self.threads:
            t.start()
        return self

    def stop(self, grace_seconds: float) -> None:
        """Stop claiming; attempts still running after ``grace_seconds`` go back to ready."""
        if not self.stopping.is_set():
            self.drain_deadline = time.monotonic() + grace_seconds
            self.stopping.set()

    def join(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        for t in self.threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in self.threads)

    # -- one slot ----------------------------------------------------------------------------
    def _slot(self) -> None:
        proc = self.make_processor()
        while not self.stopping.is_set():
            self.last_beat = time.monotonic()
            if not self.gate.wait_open(self.stopping):
                continue
            try:
                delivery = proc.claim()
                if delivery is None:
                    self.queue.wait(self.idle_wait)
                    self.outage.ok()
                    continue
                try:
                    attempt = proc.begin(delivery)
                except Unavailable:
                    # The database is down: hand the payload back now rather than at lease expiry.
                    self._quietly(lambda: self.queue.requeue(delivery.token, front=True))
                    raise
                self.outage.ok()
                if attempt is not None:
                    self._run(proc, attempt)
            except Unavailable as exc:
                self.stopping.wait(self.outage.failed(exc))
            except Exception:
                log.exception("unexpected error in worker slot; continuing in 1s")
                self.stopping.wait(1.0)

    def _run(self, proc: TaskProcessor, attempt: Attempt) -> None:
        with self._count_lock:
            self.in_flight += 1
        try:
            outcome = self._supervise(proc, attempt)
            if outcome is not None:
                self._finish(proc, attempt, outcome)
        finally:
            with self._count_lock:
                self.in_flight -= 1

    def _supervise(self, proc: TaskProcessor, attempt: Attempt) -> Outcome | None:
        """Wait for the review while heartbeating; None means the lease was lost."""
        box: dict[str, object] = {}
        done = threading.Event()

        def review() -> None:
            try:
                box["outcome"] = proc.review(attempt)
            except ConfigurationError as exc:
                box["config"] = exc
            except BaseException as exc:  # noqa: BLE001 - reported as a retryable outcome
                box["outcome"] = Outcome.retryable(f"{type(exc).__name__}: {exc}")
            finally:
                done.set()

        threading.Thread(target=review, name=f"review-{attempt.task_id}", daemon=True).start()
        beat = proc.lease.heartbeat_seconds
        next_beat = time.monotonic() + beat
        while True:
            now = time.monotonic()
            wake = next_beat if self.drain_deadline is None else min(next_beat, self.drain_deadline)
            if done.wait(max(0.01, min(wake - now, 1.0))):
                break
            now = time.monotonic()
            if self.drain_deadline is not None and now >= self.drain_deadline:
                return Outcome.release("worker shut down before the attempt finished")
            if proc.overran(attempt):
                limit = proc.lease.max_runtime_seconds
                return Outcome.retryable(f"attempt exceeded PROCESSING_TIMEOUT_SECONDS={limit:g}")
            if now >= next_beat:
                next_beat = now + beat
                try:
                    if not proc.heartbeat(attempt):
                        return None
                except Unavailable as exc:  # keep going: the fenced commit decides
                    log.warning("heartbeat failed for task %s: %s", attempt.task_id, exc)
        if "config" in box:
            error = box["config"]
            assert isinstance(error, ConfigurationError)
            self.gate.trip(error)
            return Outcome.release(f"LLM configuration error: {error}")
        outcome = box["outcome"]
        assert isinstance(outcome, Outcome)
        return outcome

    def _finish(self, proc: TaskProcessor, attempt: Attempt, outcome: Outcome) -> None:
        """Write the outcome, retrying while Redis or the database is down, for about one lease.
        Retrying is safe: the writes are fenced and token-checked. Past that the lease expires
        and the reaper settles the task from the row."""
        give_up = time.monotonic() + proc.lease.lease_seconds
        delay = 0.2
        while True:
            try:
                proc.finish(attempt, outcome)
                return
            except Unavailable as exc:
                if time.monotonic() + delay > give_up:
                    log.warning("could not record the outcome of task %s: %s; the reaper will settle it",
                                attempt.task_id, exc)
                    return
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    @staticmethod
    def _quietly(action: Callable[[], object]) -> None:
        try:
            action()
        except Exception:  # noqa: BLE001 - best effort; the lease expiry covers it
            pass
