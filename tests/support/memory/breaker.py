"""InMemoryLlmBreaker: the breaker of one process (unit tests, the offline demo), deciding as
``lua/breaker.lua`` does; ``tests/contract/test_breaker_contract.py`` holds both to one contract."""

from __future__ import annotations

import math
import threading
from collections import Counter

from docllm.adapters.redis.breaker_ops import BreakerOps
from docllm.domain.llm.breaker import BreakerPolicy, BreakerState, BreakerView
from docllm.domain.tasks.ports import Clock


class InMemoryLlmBreaker(BreakerOps):
    def __init__(self, clock: Clock, policy: BreakerPolicy):
        self._clock, self.policy = clock, policy
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, int]] = Counter()  # ("ok" | "fail", bucket) -> outcomes
        self._open = False
        self._opened_at = self._probe_at = self._probe_until = self._last_ok = None  # type: int | None
        self._probe: str | None = None
        self._transitions = self._open_total = 0

    def _window(self, bucket: int) -> tuple[int, int]:
        for key in [k for k in self._counts if k[1] <= bucket - 10 or k[1] > bucket]:
            del self._counts[key]
        calls = sum(self._counts.values())
        return calls, sum(n for (kind, _), n in self._counts.items() if kind == "fail")

    def _run(self, op: str, ok: bool = False, worker_id: str = "", count: int = 1) -> BreakerView:
        p, now = self.policy, self._clock.now_ms()
        bucket = math.floor(now / max(1, p.window_ms // 10))
        changed = ""
        with self._lock:
            if self._open:  # a backward clock step: nothing is due more than open_ms ahead
                self._probe_at = min(self._probe_at if self._probe_at is not None else now, now + p.open_ms)
                if self._probe_until is not None:
                    self._probe_until = min(self._probe_until, now + p.open_ms)
            if op == "record":
                self._counts["ok" if ok else "fail", bucket] += count
                if ok:
                    self._last_ok = now
                if not self._open and not ok:
                    calls, failures = self._window(bucket)
                    if calls >= p.min_calls and failures >= p.failure_ratio * calls:
                        self._open, self._opened_at, self._probe_at = True, now, now + p.open_ms
                        self._transitions += 1
                        changed = "opened"
            elif op == "probe":
                probe_due = self._open and (self._probe_at if self._probe_at is not None else now) <= now
                if probe_due and (self._probe is None or self._probe_until is None or self._probe_until < now):
                    self._probe, self._probe_until, changed = worker_id, now + p.open_ms, "probing"
            elif op == "result" and self._open and self._probe == worker_id:
                self._probe = self._probe_until = None
                self._transitions += 1
                if ok:
                    self._open_total += max(0, now - (self._opened_at if self._opened_at is not None else now))
                    self._open, self._opened_at, self._probe_at, self._last_ok = False, None, None, now
                    self._counts.clear()
                    changed = "closed"
                else:
                    self._probe_at, changed = now + p.open_ms, "reopened"
            calls, failures = self._window(bucket)
            state = BreakerState.closed
            if self._open:
                due = self._probe_at if self._probe_at is not None else now
                state = BreakerState.half_open if due <= now else BreakerState.open
            return BreakerView(
                state=state,
                now_ms=now,
                calls=calls,
                failures=failures,
                opened_at_ms=self._opened_at if self._open else None,
                probe_at_ms=self._probe_at if self._open else None,
                last_ok_ms=self._last_ok,
                transitions=self._transitions,
                open_ms_total=self._open_total,
                changed=changed,
            )
