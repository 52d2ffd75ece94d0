"""Several LLM deployments in the simulation (issue 27, scenario ``deployments``): each its own
SimLLM with its own outages (fault ``deployment_down:NAME``), and the workers' reviewer the
shipped ``RoutedReviewer`` over them, with each deployment's breaker built by the container
(``deployment_health``: breaker.lua on the run's Redis) and reached through the actor's faults.

Checked here besides I1-I12 (I9 per deployment is ``Checker.check_outage_charges``):

- FALLBACK (liveness): the time during which some deployment is up and work waits (a task not
  yet ended), summed since the latest commit or since every deployment was down, stays under
  ``bound_ms``: an outage of one pauses nothing, and after both were down work resumes within it.
  Time with Redis or the database down (and the runtime's backoff after) or no reaper or
  reconciler alive is not summed. The bound: a crashed holder's recovery (lease + reaper
  interval + 2 s), the longest retry backoff, a worker's restart, two LLM calls (the one that
  failed over and the one that answers), two breaker open intervals (the fleet's probe after both
  were down, a worker's own check's backoff) and 10 s: 197 s with the scenario's settings.
- ROUTE: a chunk (one lease's review) is never in flight at two deployments at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from docllm.adapters.llm.routed_reviewer import Route, RoutedReviewer
from docllm.domain.review.chunking import Chunk
from docllm.domain.review.rubric import Rubric
from sim.fault_injection import Faulty
from sim.invariants import ALL_BLOCKERS
from sim.llm import SimLLM
from sim.observers import Gate

# Each deployment breaker's changes (open, closed) would reach stderr through logging's last resort;
# the run's trace has every outage and its end.
logging.getLogger("docllm.adapters.llm.routed_reviewer").addHandler(logging.NullHandler())


class DeploymentLink:
    """One deployment's ``OpenAIReviewer`` as one host reaches it: the calls go to its SimLLM."""

    def __init__(self, watch: DeploymentWatch, name: str, host: str):
        self.watch, self.name, self.host = watch, name, host
        self.llm = watch.llms[name]

    async def review_chunk(
        self,
        task_name: str,
        chunk: Chunk,
        part: int,
        parts: int,
        rubric: Rubric | None = None,
        max_wait: float | None = None,
    ) -> dict[str, Any]:
        key = self.watch.sending(self.name)
        try:
            return await self.llm.review(task_name, chunk.text, self.host)
        finally:
            self.watch.sent(key, self.name)

    async def check(self) -> None:
        await self.llm.check(self.host)

    async def close(self) -> None:
        pass


class DeploymentWatch:
    def __init__(self, system: Any):
        self.sys = system
        world = system.world
        names = tuple(d.name for d in system.settings.deployments)
        self.llms = {
            n: SimLLM(system.scenario.llm, world.rng_for(f"llm-{n}"), system.llm_call_ended, lambda: world.now, n)
            for n in names
        }
        self.outages: dict[str, list[list[int | None]]] = {n: [] for n in names}  # [start, end] of each
        self.in_flight: dict[Any, str] = {}  # the review task of a chunk -> the deployment it is at
        self.checked = 0  # when ``check`` last ran (true ms)
        self.owed_ms = self.max_owed_ms = 0  # waiting time since the latest commit (FALLBACK)
        self.health = system.container.deployment_health()  # [(deployment, its breaker, limiter)]
        self.draw = world.rng_for("deployment-draw").random
        s = system.settings
        self.bound_ms = system.bound_ms + int(
            (
                s.retry_max_seconds
                + system.scenario.restart_s[1]
                + 2 * system.scenario.llm_max_s()
                + 2 * s.breaker_open_seconds
                + 10
            )
            * 1000
        )

    # -- the workers' reviewer ---------------------------------------------------------------
    def reviewer_for(self, actor: Any) -> RoutedReviewer:
        """The reviewer ``docllm worker`` builds with several deployments (container ``_reviewer``),
        on this host's links, each deployment's breaker through the actor's faults and Redis's
        outages, its port calls on virtual time and a seeded draw."""
        s, sys = self.sys.settings, self.sys
        routes = [
            Route(
                d,
                DeploymentLink(self, d.name, actor.name),  # type: ignore[arg-type]
                Faulty(Gate(breaker, sys.down, "redis", sys.ledger), actor.budget, f"breaker.{d.name}"),
                limiter,
            )
            for d, breaker, limiter in self.health
        ]
        return RoutedReviewer(
            routes,
            actor.worker_id,
            max_chunk_chars=s.llm_max_chunk_chars,
            chunk_parallelism=s.llm_chunk_parallelism,
            run=actor.port_calls().call,
            draw=self.draw,
            max_wait=s.llm_timeout_seconds,
        )

    # -- ROUTE -------------------------------------------------------------------------------
    def sending(self, name: str) -> Any:
        key = asyncio.current_task()
        other = self.in_flight.get(key)
        if other is not None and other != name:
            self.sys.ledger.violate(
                "ROUTE", None, f"a chunk went to deployment {name} while in flight at {other}", key=(other, name)
            )
        self.in_flight[key] = name
        return key

    def sent(self, key: Any, name: str) -> None:
        if self.in_flight.get(key) == name:
            del self.in_flight[key]

    # -- outages -----------------------------------------------------------------------------
    def down(self, name: str, ms: int) -> None:
        llm, now = self.llms[name], self.sys.world.now
        if llm.down_since is not None:
            return
        llm.down_since = now
        self.outages[name].append([now, None])
        self.sys.world.after(ms, lambda: self.up(name))

    def up(self, name: str) -> None:
        llm = self.llms[name]
        if llm.down_since is not None:
            llm.down_since = None
            self.outages[name][-1][1] = self.sys.world.now
            self.sys.world.log("fault", f"deployment {name} is back", who="faults")

    def heal(self) -> None:
        for name in self.llms:
            self.up(name)

    def all_down(self) -> bool:
        return all(llm.down_since is not None for llm in self.llms.values())

    # -- FALLBACK ----------------------------------------------------------------------------
    def check(self) -> None:
        """Called about once a second of virtual time: the time owed a commit grows while some
        deployment is up and work waits (less any Redis or database outage, or no reaper or
        reconciler alive); a commit, or every deployment down, sets it back to 0. A task that ends
        failed does not: a fleet that fails its work instead of falling back is not live."""
        s = self.sys
        now, last = s.world.now, self.checked
        self.checked = now
        if self.all_down() or s.ledger.last_commit > last:
            self.owed_ms = 0
            return
        if s.ledger.nonterminal == 0:
            return
        self.owed_ms += now - last - s.world.windows.overlap(ALL_BLOCKERS, last, now)
        self.max_owed_ms = max(self.max_owed_ms, self.owed_ms)
        if self.owed_ms > self.bound_ms:
            down = [n for n, llm in self.llms.items() if llm.down_since is not None]
            what = f"deployment {', '.join(down)} down" if down else "every deployment up"
            s.ledger.violate(
                "FALLBACK",
                None,
                f"no commit for {self.owed_ms / 1000:.0f}s of waiting work while a deployment served "
                f"({what}; since the last commit at {s.ledger.last_commit / 1000:.1f}s): over the bound "
                f"of {self.bound_ms / 1000:.0f}s",
                key=s.ledger.last_commit,
            )

    def periods(self) -> tuple[int, int]:
        """Milliseconds so far with some but not every deployment down, and with every one down."""
        now = self.sys.world.now
        spans = {n: [(a or 0, now if b is None else b) for a, b in out] for n, out in self.outages.items()}
        marks = sorted({0, now, *(t for out in spans.values() for span in out for t in span)})
        some = every = 0
        for a, b in zip(marks, marks[1:], strict=False):
            down = sum(any(s <= a and b <= e for s, e in out) for out in spans.values())
            if down == len(spans):
                every += b - a
            elif down:
                some += b - a
        return some, every
