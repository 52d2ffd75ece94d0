"""RoutedReviewer: the DocumentReviewer over several LLM deployments (DOCLLM_LLM_DEPLOYMENTS,
ARCHITECTURE.md, Deployments), each an ``OpenAIReviewer`` with its own rate limits and prices.

Each chunk goes to one deployment at a time (``domain.deployments.route``): the first healthy one
in order (or one drawn by weight); when it answers 5xx, 429, a timeout or no connection
(``ProviderUnavailable``) the chunk goes to the next one, so the same chunk is never in flight at
two deployments. A chunk sent to a deployment the attempt's spend reservation is not at is
reserved there first, and passed over when that deployment's cap or the fleet's refuses it (the
spend ledger, I16). Each deployment has its own breaker in Redis: one whose breaker is open is passed
over; half-open, the chunk is its probe when this process wins the probe lease. Only when every
deployment failed a chunk does the attempt fail with ``ProviderUnavailable``, and the fleet's
breaker (``LlmGate``) then judges it as for one provider: an outage of one deployment is never
seen by the verdict, an outage of all of them pauses claims as before (I9).
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
from docllm.domain.breaker import BreakerState, BreakerView
from docllm.domain.chunking import Chunk, split_markdown
from docllm.domain.deployments import Deployment, route
from docllm.domain.errors import ProviderUnavailable, SpendCapReached, Unavailable
from docllm.domain.ports import LlmBreaker
from docllm.domain.prompt import build_messages
from docllm.domain.report import merge_reports, require_reviewable
from docllm.domain.rubric import Rubric
from docllm.domain.services.ledger import REFUSED_RETRY_S, current_purse
from docllm.domain.services.rate_gate import OverBudget

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
        limited: list[tuple[float, str]] = []  # (wait, name): passed over for their rate limits
        capped: list[str] = []  # passed over: the spend ledger refused the chunk there (I16)
        while (d := route(self.deployments, await self._states(), tried, self._draw())) is not None:
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
                report = await r.reviewer.review_chunk(task_name, chunk, part, parts, rubric, max_wait)
            except OverBudget as exc:  # our own limits, not a failure: its breaker hears nothing
                limited.append((exc.wait, d.name))
                continue
            except ProviderUnavailable as exc:
                last = exc
                log.info("deployment %s failed a chunk, falling back: %s", d.name, exc)
                await self._outcome(r, probing, ok=False)
                continue
            await self._outcome(r, probing, ok=True)
            return report
        if limited:  # the others failed or are open: wait for the nearest turn (a wait is never the document's, I12)
            r = self.routes[min(limited)[1]]
            try:
                report = await r.reviewer.review_chunk(task_name, chunk, part, parts, rubric)
            except ProviderUnavailable as exc:
                await self._outcome(r, False, ok=False)
                raise ProviderUnavailable(
                    f"every LLM deployment failed the chunk; the last: {exc}", exc.retry_after
                ) from None
            await self._outcome(r, False, ok=True)
            return report
        if last is None and capped:  # nothing failed: every deployment left is at a spend cap
            raise SpendCapReached(f"every LLM deployment is at a spend cap ({', '.join(capped)})", REFUSED_RETRY_S)
        if last is None:  # every one half-open, each probed by another process: none may take it now
            raise ProviderUnavailable("every LLM deployment is being probed by another process")
        raise ProviderUnavailable(f"every LLM deployment failed the chunk; the last: {last}", last.retry_after)

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
