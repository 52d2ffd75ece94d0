"""The endings of issue 43 in the simulation: scenarios run only when named
(``python -m sim.endings --scenario NAME``; ``tests/sim/test_endings_run.py``). Each is a scenario
of the registry (``deployments``, ``batches``) with one of the issue's situations injected into the
simulated provider, and a check that sees the product end it right; the product runs as shipped.

- ``refusals`` (two deployments): deployment ``a`` refuses every call and check for stretches of
  its own, as a revoked key does (401: ``ConfigurationError``), while ``b`` serves. REFUSAL: no
  attempt is charged or failed for that refusal (the chunk goes to ``b``); FALLBACK holds.
- ``batch-failures`` (the batch lane): the provider fails every batch while the faults last (as
  OpenAI does over the organisation's enqueued-token limit, ``token_limit_exceeded``). BOUND: no
  task is handed back by its batches' ends more than DOCLLM_MAX_HANDBACKS times (then it went
  realtime, or failed saying why); I2: every task ends within the bound.
- ``chunk-change`` (the batch lane, documents of three chunks): DOCLLM_LLM_MAX_CHUNK_CHARS changes
  mid-run; every process (re)started after it splits by the new size, batches already out were
  made with the old one. CHUNKS: a task a batch committed has in its report as many chunks as that
  batch had lines for it, and its row at least as many calls (every line placed and paid).
- ``slow-create`` (the batch lane): the provider makes some batches only a while after the create
  call, whose answer is lost, within the create's timeout (the batcher's batch lease lapsed
  meanwhile). ONE-BATCH: at most one provider batch per record is left billed (not cancelled).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from docllm.domain.batches.lines import parse_custom_id
from docllm.domain.errors import ConfigurationError, ProviderUnavailable
from docllm.domain.tasks.model import TaskStatus
from sim.llm import _token
from sim.product import ProductSystem
from sim.runner import Options, RunResult, _run
from sim.scenarios import SCENARIOS, Scenario

REFUSED = "401 invalid_api_key (simulated refusal by deployment {name}: its key revoked)"
REFUSAL_S = (240.0, 600.0)  # each stretch of refusals
UNCOUNTED = ("its batcher stopped",)  # a batch's end that counts nothing, by design (the provider never had it)
SMALL_CHUNK, LARGE_CHUNK = 300, 12_000  # DOCLLM_LLM_MAX_CHUNK_CHARS before and after the change
SLOW_CREATES = 0.4  # of the creates during the faults, the share the provider makes late


def _base(name: str, about: str, **changes: Any) -> Scenario:
    return replace(SCENARIOS[name], about=about, default_run=False, **changes)


def _deployments_without_outages() -> dict[str, Any]:
    faults = {k: v for k, v in SCENARIOS["deployments"].faults.items() if not k.startswith("deployment_down:")}
    return {"faults": faults}


ENDINGS: dict[str, Scenario] = {
    "refusals": _base(
        "deployments",
        "two deployments; a refuses every call and check (a revoked key, 401) for stretches of 4 to 10 min "
        "while b serves, among crashes, a Redis outage and skewed clocks: nothing is charged or failed for "
        "the refusal (REFUSAL), commits go on at b (FALLBACK)",
        seeds=3,
        **_deployments_without_outages(),
    ),
    "batch-failures": _base(
        "batches",
        "the batch lane with every batch failed by the provider while the faults last (token_limit_exceeded): "
        "each end counts, no task is handed back by batches past DOCLLM_MAX_HANDBACKS (BOUND), every task ends (I2)",
        seeds=3,
    ),
    "chunk-change": _base(
        "batches",
        "the batch lane, documents of three chunks, DOCLLM_LLM_MAX_CHUNK_CHARS raised mid-run: each batch is "
        "applied with the chunking it was made with, every line placed and paid (CHUNKS)",
        seeds=3,
        settings_changes={**SCENARIOS["batches"].settings_changes, "llm_max_chunk_chars": SMALL_CHUNK},
    ),
    "slow-create": _base(
        "batches",
        "the batch lane, the provider making some batches only a while after their create (its answer lost, "
        "the batch lease lapsed): one billed batch per record (ONE-BATCH)",
        seeds=3,
    ),
}


# -- refusals ----------------------------------------------------------------------------------------
class Refusals:
    """Deployment ``name`` refuses for stretches of its own; REFUSAL checked every second."""

    def __init__(self, system: ProductSystem, name: str = "a"):
        self.sys, self.name = system, name
        deploy = system.deploy
        assert deploy is not None
        self.llm = deploy.llms[name]
        self.until = 0  # refusing until (virtual ms)
        self.refused = 0  # calls and checks refused
        self.seen = 0  # ledger.charged entries looked at
        self.words = REFUSED.format(name=name)
        self._review, self._check = self.llm.review, self.llm.check
        self.llm.review, self.llm.check = self.review, self.check
        rng, world = system.world.rng_for("refusals"), system.world
        at = rng.uniform(0, 0.2) * system.faults_end_ms
        while at < system.faults_end_ms:
            ms = int(rng.uniform(*REFUSAL_S) * 1000)
            world.at(int(at), lambda ms=ms: self.start(ms))
            at += ms + rng.uniform(60, 300) * 1000
        checked = deploy.check
        deploy.check = lambda: (checked(), self.check_charges())  # type: ignore[method-assign]

    def refusing(self) -> bool:
        return self.sys.faults_active and self.sys.world.now < self.until

    def start(self, ms: int) -> None:
        if self.sys.faults_active:
            self.until = self.sys.world.now + ms
            said = f"LLM deployment {self.name} refuses for {ms / 60_000:.1f} min"
            self.sys.ledger.fault(f"refusal:{self.name}", said)

    async def _refuse(self) -> None:
        self.refused += 1
        await asyncio.sleep(self.llm.rng.uniform(0.05, 0.5))
        raise ConfigurationError(f"the LLM at deployment {self.name} refused: {self.words}")

    async def review(self, task_name: str, document: str, host: str | None = None) -> dict[str, Any]:
        if self.refusing():
            self.sys.world.log("note", f"deployment {self.name} refuses a call ({_token()})")
            await self._refuse()
        return await self._review(task_name, document, host)

    async def check(self, host: str | None = None) -> None:
        if self.refusing():
            await self._refuse()
        await self._check(host)

    def check_charges(self) -> None:
        led = self.sys.ledger
        for t, tid, attempt, _, error in led.charged[self.seen :]:
            if self.words in error:
                led.violate(
                    "REFUSAL",
                    tid,
                    f"attempt {attempt} was charged at {t / 1000:.1f}s for deployment {self.name}'s refusal "
                    f"while another deployment served: {error[:120]}",
                    key=attempt,
                    t=t,
                )
        self.seen = len(led.charged)


# -- batch-failures ----------------------------------------------------------------------------------
class FailingBatches:
    """Every batch created while the faults last fails at once; BOUND checked at each hand-back."""

    def __init__(self, system: ProductSystem):
        self.sys = system
        watch = system.batch_watch
        assert watch is not None
        self.api = api = watch.api
        self.failed = 0
        self.returns: Counter[int] = Counter()  # task -> hand-backs at its batches' ends
        self.seen = 0
        create = api.create

        def failing(input_file_id: str, ref: str) -> Any:
            made = create(input_file_id, ref)
            if system.faults_active:
                batch = api.batches[made.id]
                api._finish(batch, "failed", system.world.now)  # "token_limit_exceeded"
                self.failed += 1
                return api._seen(batch)
            return made

        api.create = failing  # type: ignore[method-assign]
        checker = system.checker
        handbacks = checker.check_handbacks
        checker.check_handbacks = lambda: (handbacks(), self.check_bound())  # type: ignore[method-assign]

    def check_bound(self) -> None:
        led, bound = self.sys.ledger, self.sys.settings.max_handbacks
        for t, tid, attempt, _, error, _counted in led.handed[self.seen :]:
            if not error.startswith("batch ") or any(words in error for words in UNCOUNTED):
                continue
            self.returns[tid] += 1
            if self.returns[tid] > bound:
                led.violate(
                    "BOUND",
                    tid,
                    f"attempt {attempt} handed back at {t / 1000:.1f}s by its batch's end, the task's "
                    f"{self.returns[tid]}th such hand-back: over DOCLLM_MAX_HANDBACKS={bound} ({error[:80]})",
                    key=self.returns[tid],
                    t=t,
                )
        self.seen = len(led.handed)


# -- chunk-change --------------------------------------------------------------------------------------
def three_chunks(n: int) -> str:
    return "\n".join(f"## Part {p} of document {n}\n\n" + "Some text to review. " * 10 + "\n" for p in (1, 2, 3))


class ChunkChange:
    """Documents of three chunks at SMALL_CHUNK; LARGE_CHUNK for every process built after the change."""

    def __init__(self, system: ProductSystem):
        self.sys = system
        arrivals = system.arrivals
        system.arrivals = lambda: [  # type: ignore[method-assign]
            (at, name, three_chunks(i)) for i, (at, name, _doc) in enumerate(arrivals())
        ]
        self.changed_at = system.faults_end_ms // 2
        system.world.at(self.changed_at, self.change)
        final = system.checker.final
        system.checker.final = lambda *a: (self.check_chunks(), final(*a))[1]  # type: ignore[method-assign]

    def change(self) -> None:
        s = self.sys
        s.settings = replace(s.settings, llm_max_chunk_chars=LARGE_CHUNK)
        s.container.batch_target.reset()  # the next process built (a restart) splits by the new size
        s.ledger.fault("chunk_change", f"DOCLLM_LLM_MAX_CHUNK_CHARS {SMALL_CHUNK} -> {LARGE_CHUNK}, new processes")

    def lines_sent(self) -> Counter[tuple[int, int]]:
        api = self.sys.batch_watch.api  # type: ignore[union-attr]
        inputs = {b.input_file_id for b in api.batches.values()}
        sent: Counter[tuple[int, int]] = Counter()
        for file_id in inputs:
            for raw in api.files[file_id].lines:
                line = parse_custom_id(raw.split('"custom_id": "', 1)[1].split('"', 1)[0])
                sent[(line.task_id, line.attempt)] += 1
        return sent

    def check_chunks(self) -> None:
        sent, led = self.lines_sent(), self.sys.ledger
        repo = self.sys.container.repository()
        for tid in led.books:
            row = repo.get(tid)
            if row is None or row.status is not TaskStatus.success or (tid, row.attempt) not in sent:
                continue
            lines = sent[(tid, row.attempt)]
            chunks, calls = row.result.get("chunks"), row.usage.calls if row.usage else 0
            if chunks != lines or calls < lines:  # the row's usage adds up every attempt's
                led.violate(
                    "CHUNKS",
                    tid,
                    f"attempt {row.attempt} committed {chunks} chunk(s) and {calls} call(s) of the {lines} lines "
                    "its batch sent",
                    key=row.attempt,
                )


# -- slow-create ---------------------------------------------------------------------------------------
class SlowCreates:
    """Some creates during the faults: the answer lost, the batch made a while later (within the
    create's timeout, after the batch lease). ONE-BATCH checked at the end."""

    def __init__(self, system: ProductSystem):
        self.sys = system
        watch = system.batch_watch
        assert watch is not None
        self.api = api = watch.api
        self.late = 0
        rng, s = system.world.rng_for("slow-create"), system.settings
        low, high = 1.5 * s.batch_lease_seconds, 0.8 * s.llm_timeout_seconds
        create = api.create

        def slow(input_file_id: str, ref: str) -> Any:
            if not system.faults_active or rng.random() >= SLOW_CREATES:
                return create(input_file_id, ref)
            ms = int(rng.uniform(low, high) * 1000)
            self.late += 1
            system.world.log("note", f"the create of {ref[:8]} is made in {ms / 1000:.1f}s; its answer is lost")
            system.world.after(ms, lambda: create(input_file_id, ref))
            raise ProviderUnavailable(f"the LLM did not answer within {s.llm_timeout_seconds:g} s (simulated)")

        api.create = slow  # type: ignore[method-assign]
        final = system.checker.final
        system.checker.final = lambda *a: (self.check_one_batch(), final(*a))[1]  # type: ignore[method-assign]

    def check_one_batch(self) -> None:
        billed = Counter(b.ref for b in self.api.batches.values() if b.status != "cancelled")
        for ref, n in billed.items():
            if n > 1:
                said = f"the record {ref[:8]} has {n} billed provider batches"
                self.sys.ledger.violate("ONE-BATCH", None, said, key=ref)


INSTALL: dict[str, Callable[[ProductSystem], Any]] = {
    "refusals": Refusals,
    "batch-failures": FailingBatches,
    "chunk-change": ChunkChange,
    "slow-create": SlowCreates,
}


def run(name: str, seed: int) -> tuple[RunResult, Any]:
    """One run of an ending: (the result, what was injected, with its counts)."""
    scenario = ENDINGS[name]
    system = ProductSystem(scenario, seed, scenario.tasks, scenario.workers, Options())
    injected: list[Any] = []
    build = system.build

    def built() -> None:  # installed once the system is built, before any actor boots
        build()
        injected.append(INSTALL[name](system))

    system.build = built  # type: ignore[method-assign]
    try:
        return _run(system, name, "product", seed, Options()), injected[0]
    finally:
        system.world.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.endings", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(ENDINGS), action="append")
    parser.add_argument("--seeds", type=int, default=None)
    args = parser.parse_args(argv)
    found = 0
    for name in args.scenario or sorted(ENDINGS):
        for seed in range(args.seeds or ENDINGS[name].seeds):
            result, _ = run(name, seed)
            found += len(result.violations)
            said = ", ".join(f"{v.invariant}: {v.message}" for v in result.violations[:3]) or "no violation"
            print(f"{name} seed {seed}: {said}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
