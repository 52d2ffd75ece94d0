"""The simulated LLM: a DocumentReviewer whose ``review()`` answers on virtual time.

The answer is decided when the call starts and arrives after its latency (never, for a hung
call). A cancelled call ends at once; one that runs on after its attempt was abandoned is an I11
finding (``on_end``).
Errors are the ones the real OpenAIReviewer raises: ProviderUnavailable for a timeout, a 429 (with
``retry_after``) or a 5xx, TransientError for an unparsable answer ("garbage").

A provider outage (``down``, the fault ``llm_down``): every call and every ``check()`` fails as
an unreachable provider's do, calls in flight when it starts included; the lease tokens whose
latest call failed that way are kept, for I9 (no attempt is charged for an outage).

Poison documents (task names starting with ``poison-``) always fail the same way: ``fail``
(a 500 or garbage at once), ``timeout`` (every call times out), ``hang`` (the call never returns).

Poison batches (``poison-timeout-*``, ``poison-err500-*``, the fault ``poison_batch``): documents
submitted together that all time out, or all get a 500, while ``check()`` passes.

A provider's limit (``provider_rpm``): a call that starts when the calls accepted in the last 60 s
reach it is refused with a 429 and a Retry-After, and counted (``limit_429s``). With a ``gate``
(the product's RateGate over the real limiter on the simulation's Redis and clock) every call
waits for its turn, as the OpenAIReviewer's requests do, and a 429's Retry-After holds the fleet.
How long each attempt (lease token) waited for its turn is kept (``waited_ms``: I8, I12).

Faults of issue 22 ("whose fault it is"):
- a partition of one host (``cut``, the fault ``llm_partition``): that host's calls and checks
  fail as an unreachable provider's while the others are served; a worker reaches the LLM through
  ``for_host(name)``. The lease tokens whose latest call failed for it are kept (I9).
- a provider hold (``hold``, the fault ``provider_hold``): the next call is refused with a 429 whose
  Retry-After is longer than PROCESSING_TIMEOUT_SECONDS; calls that start before it ends are
  refused too (``hold_429s``).
- garbage numbers (``garbage_until``, the fault ``garbage_hints``): answers carry headers and usage
  reports beyond belief (1e20, inf, nan, 1e30), read by the product's own parsers
  (``provider_hints.hints_from_headers``, the OpenAIReviewer's usage reader) before they reach the
  limiter (``settle``) and the attempt's meter.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from docllm.adapters.llm.openai_reviewer import _reported_tokens
from docllm.adapters.llm.provider_hints import hints_from_headers
from docllm.domain.errors import ProviderUnavailable, TransientError
from docllm.domain.llm.rate_limits import ProviderHints
from docllm.domain.llm.usage import LlmCall, record
from docllm.domain.review.report import make_report

POISON_KINDS = ("fail", "timeout", "hang")
BATCH_KINDS = ("timeout", "err500")  # a poison batch: every document fails the same way
Draw = tuple[int | None, Exception | None]  # a call's latency in ms (None: it hangs), the error it ends with
# What a provider beyond belief sends (issue 22 item 4): header values and usage counts.
GARBAGE_NUMBERS = ("1e20", "inf", "nan", "-inf", "99999999999999999", "1e30", "-5", "NaN")
GARBAGE_USAGE = (1e30, float("inf"), float("nan"), -3, 10**40, "lots")
# The parsers warn once per process and header name about such a number: the trace has the fault,
# and a run's output stays readable (the product's logging configuration is not the simulation's).
logging.getLogger("docllm.adapters.llm.provider_hints").addHandler(logging.NullHandler())


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
    return kind if kind in POISON_KINDS + BATCH_KINDS else None


class HostLLM:
    """One host's link to the shared SimLLM (a DocumentReviewer): cut by a partition of its own."""

    name = "openai"

    def __init__(self, llm: SimLLM, host: str):
        self.llm, self.host = llm, host

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        return await self.llm.review(task_name, document, self.host)

    async def check(self) -> None:
        await self.llm.check(self.host)


class SimLLM:
    """A DocumentReviewer (the port) driven by a seeded generator."""

    name = "openai"

    def __init__(
        self,
        profile: LlmProfile,
        rng: random.Random,
        on_end: Callable[[str | None, int], None] | None = None,
        now: Callable[[], int] = lambda: 0,
        deployment: str | None = None,
    ):
        self.profile, self.rng = profile, rng
        self.deployment = deployment  # one of several deployments (sim.deployments), or the one provider
        self.prices: Any = None  # a PriceTable: calls are priced (the spend ledger's runs, sim/money.py)
        self.spent_at: str | None = None  # the deployment name its calls' spend is counted under
        self.on_end, self.now = on_end, now
        self.calls = self.checks = 0
        self.down_since: int | None = None  # a provider outage since (virtual ms), or None
        self.outage_failed: set[str] = set()  # lease tokens whose latest call failed for the outage
        self.calls_while_down: list[tuple[int, str]] = []  # (when, "review" | "check")
        self.gate: Any = None  # the fleet's RateGate, when the scenario sets DOCLLM_LLM_RPM/TPM
        self.accepted: collections.deque[int] = collections.deque()  # start times within the last minute
        self.limit_429s = 0
        self.cut: dict[str, int] = {}  # host -> end of its partition (virtual ms)
        self.partition_failed: dict[str, str] = {}  # lease token -> its host, its latest call failed for a cut
        self.hold_next_s: float | None = None  # the next call is refused with this Retry-After (seconds)
        self.hold_until = 0  # calls starting before this are refused (virtual ms)
        self.hold_429s = 0
        self.garbage_until = 0  # answers until then carry numbers beyond belief (virtual ms)
        self.garbage_answers = 0
        self.parse_hints: Callable[[Mapping[str, str]], ProviderHints] = hints_from_headers
        self.parse_usage: Callable[[Any], tuple[int, int, int] | None] = _reported_tokens
        self.waited: dict[str, int] = {}  # lease token -> ms its calls waited for their turn (gate)
        self.waiting: dict[str, int] = {}  # lease token -> since when one of its calls waits

    def for_host(self, host: str) -> HostLLM:
        return HostLLM(self, host)

    def cut_off(self, host: str | None) -> bool:
        return host is not None and self.cut.get(host, -1) > self.now()

    def waited_ms(self, token: str | None, now: int) -> int:
        """How long the calls of this attempt waited on the fleet's limits or a provider's hold."""
        if token is None:
            return 0
        since = self.waiting.get(token)
        return self.waited.get(token, 0) + (now - since if since is not None else 0)

    async def review(self, task_name: str, document: str, host: str | None = None) -> dict[str, Any]:
        if self.gate is None:
            return await self._review(task_name, host)
        token = _token()
        if token is not None:
            self.waiting[token] = self.now()
        try:
            async with self.gate.request(1000) as ticket:
                self._turned(token)
                try:
                    report = await self._review(task_name, host, ticket)
                except TransientError as e:
                    if e.retry_after is not None:
                        ticket.hints = self.parse_hints(self._headers(retry_after=e.retry_after))
                    raise
                return report
        finally:
            self._turned(token)

    def _turned(self, token: str | None) -> None:
        since = self.waiting.pop(token, None) if token is not None else None
        if token is not None and since is not None:
            self.waited[token] = self.waited.get(token, 0) + self.now() - since

    def outage_error(self) -> ProviderUnavailable:
        if self.deployment is not None:  # each deployment's own words: I9 tells whose outage failed a call
            return ProviderUnavailable(f"cannot reach the LLM (simulated outage of deployment {self.deployment})")
        return ProviderUnavailable("cannot reach the LLM (simulated provider outage)")

    def partition_error(self, host: str) -> ProviderUnavailable:
        return ProviderUnavailable(f"cannot reach the LLM (simulated partition of host {host})")

    async def check(self, host: str | None = None) -> None:
        self.checks += 1
        if self.down_since is not None:
            self.calls_while_down.append((self.now(), "check"))
        await asyncio.sleep(self.rng.uniform(0.05, 0.5))
        if self.down_since is not None:
            raise self.outage_error()
        if host is not None and self.cut_off(host):
            raise self.partition_error(host)

    async def _review(self, task_name: str, host: str | None = None, ticket: Any = None) -> dict[str, Any]:
        self.calls += 1
        token = _token()
        started = self.now()
        cut = self.cut_off(host)
        if self.down_since is not None:
            self.calls_while_down.append((started, "review"))
        latency_ms: int | None
        error: Exception | None
        if self.down_since is not None or cut:  # never reaches the provider: connection refused, or a 5xx
            latency_ms, error = int(self.rng.uniform(50, 2_000)), None
        else:
            latency_ms, error = self.draw(task_name)
        if latency_ms is None:
            await asyncio.get_running_loop().create_future()  # a hung call: only cancelling ends it
            return {}  # never reached
        await asyncio.sleep(latency_ms / 1000)
        if self.on_end is not None:
            self.on_end(token, started)
        self._raise_if_unreachable(token, host, cut)
        if error is not None:
            raise self._as_read(error)
        self._answered(ticket, latency_ms)
        return make_report([], f"simulated review of {task_name}", "openai", "sim-llm")

    def _raise_if_unreachable(self, token: str | None, host: str | None, cut: bool) -> None:
        """The call fails as an unreachable provider's if it is down now (a call in flight when the
        outage began fails too) or this host is cut off (or was when it sent). Which one is kept by
        lease token, for I9: the attempt is not charged for it."""
        if token is not None:
            self.outage_failed.discard(token)
            self.partition_failed.pop(token, None)
        if self.down_since is not None:
            if token is not None:
                self.outage_failed.add(token)
            raise self.outage_error()
        if host is not None and (cut or self.cut_off(host)):
            if token is not None:
                self.partition_failed[token] = host
            raise self.partition_error(host)

    def _as_read(self, error: Exception) -> Exception:
        """The error as the real reviewer raises it: a 429's Retry-After read from a garbage header
        (bounded or not) while the provider sends numbers beyond belief."""
        if isinstance(error, TransientError) and error.retry_after is not None and self.garbage():
            said = self.parse_hints(self._headers(retry_after=error.retry_after)).retry_after_s
            return type(error)(str(error), retry_after=said)
        return error

    # -- what an answer says besides the report ---------------------------------------------
    def garbage(self) -> bool:
        return self.garbage_until > self.now()

    def _headers(self, retry_after: float | None = None) -> dict[str, str]:
        """The answer's rate-limit headers: none normally, numbers beyond belief while garbage."""
        if not self.garbage():
            return {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        self.garbage_answers += 1
        r = self.rng
        names = (
            "x-ratelimit-remaining-requests",
            "x-ratelimit-remaining-tokens",
            "x-ratelimit-reset-requests",
            "x-ratelimit-reset-tokens",
            "x-ratelimit-limit-requests",
            "x-ratelimit-limit-tokens",
            "retry-after",
            "retry-after-ms",
        )
        return {name: r.choice(GARBAGE_NUMBERS) for name in names if r.random() < 0.7}

    def _answered(self, ticket: Any, latency_ms: int) -> None:
        """The usage the answer reports and its headers, read as the OpenAIReviewer reads them."""
        if self.garbage():
            r = self.rng
            reported = {
                "prompt_tokens": r.choice(GARBAGE_USAGE),
                "completion_tokens": r.choice((50, *GARBAGE_USAGE)),
                "total_tokens": 0,
            }
        else:
            reported = {"prompt_tokens": 800, "completion_tokens": 200, "total_tokens": 1000}
        tokens = self.parse_usage({"usage": reported})  # the answer's body, as the reviewer decodes it
        prompt, completion, cached = tokens or (0, 0, 0)
        cost = self.prices.cost("sim-llm", prompt, completion, cached) if self.prices is not None else None
        record(LlmCall("sim-llm", "ok", latency_ms / 1000, prompt, completion, cost, cached, self.spent_at))
        if ticket is not None:
            ticket.hints = self.parse_hints(self._headers())
            if tokens is not None:
                ticket.used = prompt + completion

    def answer(self, task_name: str) -> tuple[int | None, dict[str, Any] | None, Exception | None]:
        """The original design's blocking call: (latency, report, error), decided now."""
        self.calls += 1
        latency_ms, error = self.draw(task_name)
        if self.down_since is not None:
            self.calls_while_down.append((self.now(), "review"))
            latency_ms, error = int(self.rng.uniform(50, 2_000)), self.outage_error()
        report = None if error else make_report([], f"simulated review of {task_name}", "openai", "sim-llm")
        return latency_ms, report, error

    def draw(self, task_name: str) -> Draw:
        """How long the call takes (None: it hangs) and the error it ends with, decided now."""
        refused = self._refusal()
        if refused is not None:
            return refused
        kind = poison_kind(task_name)
        if kind is not None:
            return self._poisoned(kind)
        failed = self._failure_by_profile()
        return failed if failed is not None else self._success_by_profile()

    # Each draw below takes its random numbers in the order it always has: the seeds' replays
    # depend on it (one r.random() for an error, a second for a success's latency).

    def _refusal(self) -> Draw | None:
        """A 429 before anything else: over the provider's limit, or the provider holds everyone."""
        p = self.profile
        if p.provider_rpm and self._over_limit(p.provider_rpm):
            self.limit_429s += 1
            wait_s = max(1, math.ceil((self.accepted[0] + 60_000 - self.now()) / 1000))
            return 100, TransientError("LLM rate limit (429): over the provider's limit", retry_after=wait_s)
        now = self.now()
        if self.hold_next_s is not None:  # the provider says: nobody sends for this long
            hold_s, self.hold_next_s = self.hold_next_s, None
            self.hold_until = max(self.hold_until, now + int(hold_s * 1000))
            return 100, ProviderUnavailable("LLM rate limit (429): the provider holds every caller", retry_after=hold_s)
        if self.hold_until > now:
            self.hold_429s += 1
            wait_s = max(1, math.ceil((self.hold_until - now) / 1000))
            return 100, ProviderUnavailable("LLM rate limit (429): held by the provider", retry_after=wait_s)
        return None

    def _poisoned(self, kind: str) -> Draw:
        """A poison document fails the same way every time (``fail``: a 500 or garbage, at random)."""
        if kind == "hang":
            return None, None
        if kind == "timeout":
            return self._timed_out()
        if kind == "err500":
            return self._server_error()
        return self._server_error() if self.rng.random() < 0.5 else self._garbage_report()

    def _failure_by_profile(self) -> Draw | None:
        """One of the profile's errors, at its odds, or None."""
        p, r = self.profile, self.rng
        x = r.random()
        if x < p.p_timeout:
            return self._timed_out()
        x -= p.p_timeout
        if x < p.p_429:
            return int(r.uniform(100, 500)), ProviderUnavailable(
                "LLM rate limit (429)", retry_after=r.choice([1, 5, 20])
            )
        x -= p.p_429
        if x < p.p_500:
            return self._server_error()
        x -= p.p_500
        if x < p.p_garbage:
            return self._garbage_report()
        return None

    def _success_by_profile(self) -> Draw:
        """A good answer's latency: slow past PROCESSING_TIMEOUT_SECONDS, long past a lease, or usual."""
        p, r = self.profile, self.rng
        x = r.random()
        if x < p.p_slow:
            return int(r.uniform(*p.slow_s) * 1000), None
        if x < p.p_slow + p.p_long:
            return int(r.uniform(*p.long_s) * 1000), None
        return self._latency(), None

    def _timed_out(self) -> Draw:
        p = self.profile
        return int(p.timeout_s * 1000), ProviderUnavailable(f"LLM request timed out after {p.timeout_s:g}s")

    def _server_error(self) -> Draw:
        return int(self.rng.uniform(200, 2_000)), ProviderUnavailable("LLM server error 500")

    def _garbage_report(self) -> Draw:
        return self._latency(), TransientError("LLM answered an invalid report: not JSON")

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


def _token() -> str | None:
    """The lease token of the attempt whose review task is running (the runtime names it so)."""
    task = asyncio.current_task()
    name = task.get_name() if task is not None else ""
    return name[len("review-") :] if name.startswith("review-") else None
