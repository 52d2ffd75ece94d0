"""RoutedReviewer: the DocumentReviewer over several LLM deployments (DOCLLM_LLM_DEPLOYMENTS,
ARCHITECTURE.md, Deployments), each an ``OpenAIReviewer`` with its own rate limits and prices.

Each chunk goes to one deployment at a time (``domain.llm.deployments.route``): the first healthy one
in order (or one drawn by weight); when it answers 5xx, 429, a timeout or no connection
(``ProviderUnavailable``) the chunk goes to the next one, so the same chunk is never in flight at
two deployments. A refusal (401, 403, 404, no quota: ``ConfigurationError``) is that deployment's
failure too: its key, model or account, not the document. A chunk sent to a deployment the
attempt's spend reservation is not at is reserved there first, and passed over when that
deployment's cap or the fleet's refuses it (the spend ledger, I16). Each deployment has its own
breaker in Redis, keyed by its name: one whose breaker is open is passed over; half-open, the chunk
is its probe when this process wins the probe lease, and the probe reports however it ends. Only
when every deployment failed a chunk does the attempt fail: ``ConfigurationError`` when every one
refused it, else ``ProviderUnavailable``; the fleet's breaker (``LlmGate``) then judges it as for
one provider: an outage of one deployment is never seen by the verdict, an outage of all of them
pauses claims as before (I9).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from docllm.adapters.llm.chunked import review_chunks
from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.domain.errors import ConfigurationError, DocllmError, ProviderUnavailable, SpendCapReached, Unavailable
from docllm.domain.llm.breaker import BreakerState, BreakerView
from docllm.domain.llm.deployments import Deployment, route
from docllm.domain.llm.ports import LlmBreaker
from docllm.domain.llm.rate_gate import OverBudget
from docllm.domain.llm.spend_ledger import REFUSED_RETRY_S, current_purse
from docllm.domain.review.chunking import Chunk, split_markdown
from docllm.domain.review.prompt import build_messages
from docllm.domain.review.report import merge_reports, require_reviewable
from docllm.domain.review.rubric import Rubric

log = logging.getLogger(__name__)

Run = Callable[..., Awaitable[Any]]  # a blocking port call off the event loop
POLL_S = 1.0  # a deployment's breaker is looked at again after this long (sooner after a failure)


@dataclass
class Route:
    deployment: Deployment
    reviewer: OpenAIReviewer
    breaker: LlmBreaker
    limiter: Any = None  # its RateLimiter, for the dashboard's headroom; None: no limits set


class RoutedReviewer:
    name = "openai"

    def __init__(
        self,
        routes: Sequence[Route],
        worker_id: str,
        max_chunk_chars: int = 12000,
        chunk_parallelism: int = 4,
        run: Run | None = None,
        draw: Callable[[], float] = random.random,
        poll_seconds: float = POLL_S,
        max_wait: float | None = None,
    ):
        self.routes = {r.deployment.name: r for r in routes}
        self.deployments = [r.deployment for r in routes]
        self.model = self.deployments[0].model  # the first choice's; each chunk's own is in its report
        self._worker_id, self._max_chunk_chars, self._parallelism = worker_id, max_chunk_chars, chunk_parallelism
        self._run: Run = run or asyncio.to_thread
        self._draw, self._poll = draw, poll_seconds
        # A deployment whose rate limit would hold a chunk longer than this is passed over while
        # another can take it (None: never passed over for its limits).
        self._max_wait = max_wait
        self._views: dict[str, tuple[float, BreakerView]] = {}

    async def close(self) -> None:
        for r in self.routes.values():
            await r.reviewer.close()

    async def check(self) -> None:
        """Passes when any deployment answers its check: the fleet is served while one of them is."""
        last: Exception | None = None
        for d in sorted(self.deployments, key=lambda d: d.order):
            try:
                await self.routes[d.name].reviewer.check()
                return
            except Exception as exc:  # noqa: BLE001 - the last one's error says why, if none answers
                last = exc
        assert last is not None
        raise last

    async def review(self, task_name: str, document: str, rubric: Rubric | None = None) -> dict[str, Any]:
        chunks = split_markdown(require_reviewable(document), self._max_chunk_chars)

        async def one(chunk: Chunk, part: int, parts: int) -> dict[str, Any]:
            return await self._routed(task_name, chunk, part, parts, rubric)

        return merge_reports(await review_chunks(chunks, self._parallelism, one))

    async def _routed(self, task_name: str, chunk: Chunk, part: int, parts: int, rubric: Rubric | None) -> dict:
        tried: set[str] = set()
        last: ProviderUnavailable | None = None
        refused: dict[str, ConfigurationError] = {}  # deployments that refused it (401, 403, 404, no quota)
        limited: list[tuple[float, str]] = []  # (wait, name): passed over for their rate limits
        capped: list[str] = []  # passed over: the spend ledger refused the chunk there (I16)
        probed: set[str] = set()
        report: dict[str, Any] | None = None
        while report is None and (d := route(self.deployments, await self._states(), tried, self._draw())) is not None:
            tried.add(d.name)
            r = self.routes[d.name]
            if not await self._affordable(d.name, task_name, chunk, part, parts, rubric):
                capped.append(d.name)
                continue
            probing = self._state(d.name) is BreakerState.half_open
            if probing and not await self._breaker(r.breaker.try_probe, self._worker_id):
                continue  # another process probes it: this chunk goes on to the next
            try:
                # A probe waits for its turn: the probe lease is this process's until it answers.
                max_wait = None if probing else self._max_wait
                report = await self._ask(r, probing, max_wait, task_name, chunk, part, parts, rubric)
            except OverBudget as exc:  # our own limits, not a failure: its breaker hears nothing
                limited.append((exc.wait, d.name))
            except ProviderUnavailable as exc:
                last = exc
                log.info("deployment %s failed a chunk, falling back: %s", d.name, exc)
            except ConfigurationError as exc:  # this deployment's key, model or quota: its failure alone
                refused[d.name] = exc
                probed |= {d.name} if probing else set()  # a probe reported it already
                log.warning("deployment %s refused a chunk, falling back: %s", d.name, exc)
        if report is None and limited:  # the others failed or are open: wait for the nearest turn (I12)
            r = self.routes[min(limited)[1]]
            try:
                report = await self._ask(r, False, None, task_name, chunk, part, parts, rubric)
            except ProviderUnavailable as exc:
                last = exc
            except ConfigurationError as exc:
                refused[r.deployment.name] = exc
        every_refused = await self._refusals(refused, probed)
        if report is not None:
            return report
        raise self._none_served(last, refused, every_refused, capped)

    async def _refusals(self, refused: dict[str, ConfigurationError], probed: set[str]) -> bool:
        """Whether every deployment refused the chunk (the document's: no breaker hears it); else
        each refusal is its deployment's failure, recorded now (a probe's was already)."""
        if refused and len(refused) == len(self.deployments):
            return True
        for name in [n for n in refused if n not in probed]:
            await self._outcome(self.routes[name], False, ok=False)
        return False

    def _none_served(
        self,
        last: ProviderUnavailable | None,
        refused: dict[str, ConfigurationError],
        every_refused: bool,
        capped: list[str],
    ) -> DocllmError:
        """No deployment served the chunk. A refusal is the document's only when every deployment
        refused it (a filter saying no, or every key revoked: the fleet's check then tells which),
        and then no deployment's breaker heard it; nothing failed for an outage and some deployment
        was passed over at a spend cap: the cap's (I16); else it is the provider's, judged as one
        provider's failure."""
        if every_refused:
            return ConfigurationError(f"every LLM deployment refused the chunk; the last: {list(refused.values())[-1]}")
        if last is None and capped:  # nothing failed for an outage: the ones left are at a spend cap
            return SpendCapReached(f"every LLM deployment is at a spend cap ({', '.join(capped)})", REFUSED_RETRY_S)
        if last is None and not refused:  # every one half-open, each probed by another process: none may take it now
            return ProviderUnavailable("every LLM deployment is being probed by another process")
        what = "failed" if not refused else "failed or refused"
        said = last if last is not None else list(refused.values())[-1]
        return ProviderUnavailable(
            f"every LLM deployment {what} the chunk; the last: {said}", last.retry_after if last else None
        )

    async def _ask(
        self,
        r: Route,
        probing: bool,
        max_wait: float | None,
        task_name: str,
        chunk: Chunk,
        part: int,
        parts: int,
        rubric: Rubric | None,
    ) -> dict[str, Any]:
        """One deployment's report of the chunk, its outcome in the deployment's breaker: served, or
        failed (``ProviderUnavailable``). A refusal (``ConfigurationError``) is recorded by the caller
        once it knows whether every deployment refused the chunk (then it is the document's: a
        content filter, not the deployments). A probe reports whatever ends it, so its lease is never
        left held until it runs out: an answer the document is to blame for (an invalid report, a
        400) says the deployment serves; a refusal, a cancellation or an unexpected error ends the
        probe as failed (the breaker stays open one more interval)."""
        ok: bool | None = None  # None: nothing to record (our own limits; or an error that is not the deployment's)
        try:
            report = await r.reviewer.review_chunk(task_name, chunk, part, parts, rubric, max_wait)
            ok = True
            return report
        except ProviderUnavailable:
            ok = False
            raise
        except ConfigurationError:
            ok = False if probing else None  # not a probe: recorded by ``_routed`` (see above)
            raise
        except (OverBudget, Unavailable):  # our limits, or Redis: nothing the deployment did
            raise
        except DocllmError:
            ok = True if probing else None  # it answered: the failure is the document's
            raise
        finally:
            if probing and ok is None:
                ok = False
            if ok is not None:
                await self._outcome(r, probing, ok)

    async def _affordable(
        self, name: str, task_name: str, chunk: Chunk, part: int, parts: int, rubric: Rubric | None
    ) -> bool:
        """The spend ledger's word on sending this chunk to ``name`` (I16): reserved there first
        unless the attempt's hold is there already. Redis down: ``Unavailable`` (nothing is sent
        unreserved; the attempt is handed back, as when its own reservation could not be made)."""
        purse = current_purse()
        if purse is None or not purse.needs(name):
            return True
        requests = [build_messages(task_name, chunk.text, chunk.heading, part, parts, rubric)]
        return bool(await self._run(purse.cover, name, requests))

    async def _states(self) -> dict[str, BreakerState]:
        # The loop's clock (monotonic in production, virtual in the simulation, as LlmGate's).
        now = asyncio.get_running_loop().time()
        for name, r in self.routes.items():
            seen = self._views.get(name)
            if seen is None or now - seen[0] >= self._poll:
                view = await self._breaker(r.breaker.view)
                if view is not None:
                    self._views[name] = (now, view)
        return {name: self._state(name) for name in self.routes}

    def _state(self, name: str) -> BreakerState:
        seen = self._views.get(name)
        return BreakerState.closed if seen is None else seen[1].state

    async def _outcome(self, r: Route, probing: bool, ok: bool) -> None:
        if probing:
            view = await self._breaker(r.breaker.probe_result, self._worker_id, ok)
        else:
            view = await self._breaker(r.breaker.record, ok)
        if view is not None:
            self._views[r.deployment.name] = (asyncio.get_running_loop().time(), view)
            if view.changed:
                log.warning("deployment %s's breaker %s", r.deployment.name, view.changed)

    async def _breaker(self, call: Callable[..., Any], *args: Any) -> Any:
        """A breaker call; with Redis down, None: routing goes on by what it last saw."""
        try:
            return await self._run(call, *args)
        except Unavailable:
            return None
