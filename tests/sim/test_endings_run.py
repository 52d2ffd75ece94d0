"""The endings of issue 43 in the simulation (sim/endings.py): a deployment that refuses, batches
the provider fails again and again, a chunk size changed mid-run, batches the provider makes only
after the create's answer was lost. The product as shipped breaks no invariant; each mechanism
broken on purpose (as it was before issue 43) turns its check red."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from docllm.adapters.llm import routed_reviewer
from docllm.domain.batches import poller as batch_poller
from docllm.domain.batches.members import hand_back_all
from docllm.domain.batches.poller import BatchPoller
from sim.endings import ENDINGS, run
from sim.runner import RunResult
from sim.scenarios import SCENARIOS, names

SEEDS = range(2)


@functools.cache
def clean(name: str, seed: int) -> tuple[RunResult, Any]:
    return run(name, seed)


def found(result: RunResult) -> set[str]:
    return {v.invariant for v in result.violations}


def test_the_endings_are_run_only_when_named():
    assert set(ENDINGS).isdisjoint(SCENARIOS) and set(ENDINGS).isdisjoint(names())


@pytest.mark.long(120)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_deployment_that_refuses_charges_and_fails_nothing(seed):
    result, refusals = clean("refusals", seed)
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.drain_ms is not None
    assert refusals.refused > 0  # it did refuse, and every chunk it refused went to b


@pytest.mark.long(120)
def test_a_refusal_blamed_on_the_document_is_caught(monkeypatch):
    """A refusal ends the chunk as it did before issue 43 (only ProviderUnavailable falls back):
    attempts are charged for deployment a's refusal while b serves."""
    monkeypatch.setattr(routed_reviewer, "ConfigurationError", type("NeverRaised", (Exception,), {}))
    result, _ = run("refusals", 0)
    assert "REFUSAL" in found(result), found(result)


@pytest.mark.long(120)
@pytest.mark.parametrize("seed", SEEDS)
def test_batches_failed_again_and_again_end_every_task_within_the_bound(seed):
    result, failing = clean("batch-failures", seed)
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.drain_ms is not None
    assert failing.failed > 0 and max(failing.returns.values(), default=0) > 0


@pytest.mark.long(120)
def test_batch_ends_that_count_nothing_are_caught(monkeypatch):
    """A batch's end hands its members back uncounted, as before issue 43: a provider that fails
    every batch hands the same tasks back past DOCLLM_MAX_HANDBACKS."""

    def uncounted(proc: Any, attempts: Any, why: str) -> int:
        return hand_back_all(proc, attempts, f"{why}; handed back uncharged")

    monkeypatch.setattr(batch_poller, "return_all", uncounted)
    result, _ = run("batch-failures", 0)
    assert "BOUND" in found(result), found(result)


@pytest.mark.long(120)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_chunk_size_changed_mid_run_applies_each_batch_as_it_was_made(seed):
    result, change = clean("chunk-change", seed)
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.drain_ms is not None
    assert change.lines_sent()  # batches went out with three lines a task


@pytest.mark.long(120)
def test_results_split_by_the_pollers_own_chunk_size_are_caught(monkeypatch):
    """The poller splits by its own DOCLLM_LLM_MAX_CHUNK_CHARS, as before issue 43."""
    chunks = BatchPoller._chunks

    def own_size(self: Any, attempt: Any, batch: Any) -> Any:
        return chunks(self, attempt, type(batch)(**{**vars(batch), "max_chunk_chars": None}))

    monkeypatch.setattr(BatchPoller, "_chunks", own_size)
    for seed in SEEDS:
        result, _ = run("chunk-change", seed)
        if "CHUNKS" in found(result):
            return
    pytest.fail("no CHUNKS violation")


@pytest.mark.long(120)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_batch_made_late_after_a_lost_create_answer_is_billed_once(seed):
    result, slow = clean("slow-create", seed)
    assert result.violations == [] and result.stuck == 0 and result.lost == 0 and result.drain_ms is not None
    assert slow.late > 0


@pytest.mark.long(120)
def test_a_poller_that_adopts_before_the_creates_timeout_is_caught(monkeypatch):
    """An uploaded batch adopted after the batch lease alone, as before issue 43: the poller makes
    a batch of its own while the provider is still making the batcher's."""
    init = BatchPoller.__init__

    def impatient(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.create_timeout_ms = 0

    monkeypatch.setattr(BatchPoller, "__init__", impatient)
    for seed in SEEDS:
        result, _ = run("slow-create", seed)
        if "ONE-BATCH" in found(result):
            return
    pytest.fail("no ONE-BATCH violation")
