"""The simulated LLM: a DocumentReviewer whose ``review()`` answers on virtual time.

The answer is decided when the call starts and arrives after its latency (never, for a hung
call). A cancelled call ends at once; one that runs on after its attempt was abandoned is an I11
finding (``on_end``).
Errors are the ones the real OpenAIReviewer raises: TransientError for a timeout, a 429 (with
``retry_after``), a 5xx or an unparsable answer ("garbage").

Poison documents (task names starting with ``poison-``) always fail the same way: ``fail``
(a 500 or garbage at once), ``timeout`` (every call times out), ``hang`` (the call never returns).

A provider's limit (``provider_rpm``): a call that starts when the calls accepted in the last 60 s
reach it is refused with a 429 and a Retry-After, and counted (``limit_429s``). With a ``gate``
(the product's RateGate over the real limiter on the simulation's Redis and clock) every call
waits for its turn, as the OpenAIReviewer's requests do, and a 429's Retry-After holds the fleet.
"""

from __future__ import annotations

import asyncio
import collections
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from docllm.domain.errors import TransientError
from docllm.domain.rate_limits import ProviderHints
from docllm.domain.report import make_report

POISON_KINDS = ("fail", "timeout", "hang")


@dataclass(frozen=True)
class LlmProfile:
    median_s: float = 6.0
    sigma: float = 0.6  # of the log-normal latency
    timeout_s: float = 60.0  # DOCLLM_LLM_TIMEOUT_SECONDS: a call gives up after this
    p_timeout: float = 0.0
    p_429: float = 0.0
    p_500: float = 0.0
    p_garbage: float = 0.0
    p_long: float = 0.0  # longer than a lease, shorter than PROCESSING_TIMEOUT_SECONDS
    long_s: tuple[float, float] = (35.0, 100.0)
    p_slow: float = 0.0  # longer than PROCESSING_TIMEOUT_SECONDS (a slow but alive worker)
    slow_s: tuple[float, float] = (130.0, 200.0)
    provider_rpm: int = 0  # the provider refuses calls above this many a minute (0: no limit)


def poison_name(task_no: int, kind: str) -> str:
    return f"poison-{kind}-{task_no}.md"


def poison_kind(task_name: str) -> str | None:
    if not task_name.startswith("poison-"):
        return None
    kind = task_name.split("-")[1]
    return kind if kind in POISON_KINDS else None


class SimLLM:
    """A DocumentReviewer (the port) driven by a seeded generator."""

    name = "openai"

    def __init__(
        self,
        profile: LlmProfile,
        rng: random.Random,
        on_end: Callable[[str | None, int], None] | None = None,
        now: Callable[[], int] = lambda: 0,
    ):
        self.profile, self.rng = profile, rng
        self.on_end, self.now = on_end, now
        self.calls = 0
        self.gate: Any = None  # the fleet's RateGate, when the scenario sets DOCLLM_LLM_RPM/TPM
        self.accepted: collections.deque[int] = collections.deque()  # start times within the last minute
        self.limit_429s = 0

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        if self.gate is None:
            return await self._review(task_name)
        async with self.gate.request(1000) as ticket:
            try:
                return await self._review(task_name)
            except TransientError as e:
                if e.retry_after is not None:
                    ticket.hints = ProviderHints(retry_after_s=e.retry_after)
                raise

    async def check(self) -> None:
        pass

    async def _review(self, task_name: str) -> dict[str, Any]:
        self.calls += 1
        latency_ms, error = self.draw(task_name)
        task = asyncio.current_task()
        name = task.get_name() if task is not None else ""
        token = name[len("review-") :] if name.startswith("review-") else None  # the runtime names it so
        started = self.now()
        if latency_ms is None:
            await asyncio.get_running_loop().create_future()  # a hung call: only cancelling ends it
        await asyncio.sleep(latency_ms / 1000)  # type: ignore[operator]
        if self.on_end is not None:
            self.on_end(token, started)
        if error is not None:
            raise error
        return make_report([], f"simulated review of {task_name}", "openai", "sim-llm")

    def answer(self, task_name: str) -> tuple[int | None, dict[str, Any] | None, Exception | None]:
        """The original design's blocking call: (latency, report, error), decided now."""
        self.calls += 1
        latency_ms, error = self.draw(task_name)
        report = None if error else make_report([], f"simulated review of {task_name}", "openai", "sim-llm")
        return latency_ms, report, error

    def draw(self, task_name: str) -> tuple[int | None, Exception | None]:
        p, r = self.profile, self.rng
        if p.provider_rpm and self._over_limit(p.provider_rpm):
            self.limit_429s += 1
            wait_s = max(1, math.ceil((self.accepted[0] + 60_000 - self.now()) / 1000))
            return 100, TransientError("LLM rate limit (429): over the provider's limit", retry_after=wait_s)
        timeout_ms = int(p.timeout_s * 1000)
        kind = poison_kind(task_name)
        if kind == "hang":
            return None, None
        if kind == "timeout":
            return timeout_ms, TransientError(f"LLM request timed out after {p.timeout_s:g}s")
        if kind == "fail":
            if r.random() < 0.5:
                return int(r.uniform(200, 2_000)), TransientError("LLM server error 500")
            return self._latency(), TransientError("LLM answered an invalid report: not JSON")
        x = r.random()
        if x < p.p_timeout:
            return timeout_ms, TransientError(f"LLM request timed out after {p.timeout_s:g}s")
        x -= p.p_timeout
        if x < p.p_429:
            return int(r.uniform(100, 500)), TransientError("LLM rate limit (429)", retry_after=r.choice([1, 5, 20]))
        x -= p.p_429
        if x < p.p_500:
            return int(r.uniform(200, 2_000)), TransientError("LLM server error 500")
        x -= p.p_500
        if x < p.p_garbage:
            return self._latency(), TransientError("LLM answered an invalid report: not JSON")
        x = r.random()
        if x < p.p_slow:
            return int(r.uniform(*p.slow_s) * 1000), None
        if x < p.p_slow + p.p_long:
            return int(r.uniform(*p.long_s) * 1000), None
        return self._latency(), None

    def _over_limit(self, rpm: int) -> bool:
        """Whether a call starting now is over the limit; if not, it counts towards it."""
        now = self.now()
        while self.accepted and self.accepted[0] <= now - 60_000:
            self.accepted.popleft()
        if len(self.accepted) >= rpm:
            return True
        self.accepted.append(now)
        return False

    def _latency(self) -> int:
        p = self.profile
        seconds = min(p.timeout_s * 0.9, p.median_s * math.exp(self.rng.gauss(0.0, p.sigma)))
        return max(50, int(seconds * 1000))
