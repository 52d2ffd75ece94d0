"""The spend ledger (I16, issue 43) as a new user meets it: the container's wiring on a real
redis-server and SQLite, the real ``openai`` client against the priced test server.

- (2) a document over the per-task cap is refused before any request with DOCLLM_LLM_DEPLOYMENTS
  too (the routed reviewer);
- (3) the batch lane stops at the fleet's daily cap: each batch reserves its lines' estimate
  before its upload, and a batch that does not fit is handed back uncharged;
- (4) two pollers applying one batch count its spend once, at the deployment too;
- (6) with a cap, a deployment without a price is refused at start, naming it, and a cap with
  prices only on the deployments is accepted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from docllm.domain.batches.members import member_attempts
from docllm.domain.batches.model import BatchState
from docllm.domain.llm.budget import micro
from docllm.domain.llm.deployments import Deployment
from docllm.domain.llm.prices import Price
from docllm.domain.tasks.model import TaskStatus
from docllm.entrypoints.bootstrap import build_service
from docllm.settings import Settings, SettingsError
from tests.integration.test_batch_lane import DELAY, DOC, Rig, make_settings, two_pollers_on_a_completed_batch
from tests.support.llm_server import FakeLLM

WAIT = 60.0


@pytest.fixture
def rig_for(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., tuple[Rig, FakeLLM]]]:
    servers: list[FakeLLM] = []

    def make(**over: Any) -> tuple[Rig, FakeLLM]:
        llm = FakeLLM(batch_delay_s=DELAY).start()
        servers.append(llm)
        return Rig(make_settings(tmp_path, redis_url, llm, **over)), llm

    yield make
    for llm in servers:
        llm.stop()


def spent(rig: Rig) -> Any:
    return rig.container.spend_budget().view()


# -- (2) the per-task cap, with several deployments ----------------------------------------------


def test_a_document_over_the_per_task_cap_is_refused_before_any_request_with_deployments(rig_for):
    rig, llm = rig_for()
    dear = Price(1000.0, 4000.0)
    deployments = tuple(
        Deployment(name=n, base_url=llm.base_url, model="test-model", api_key="k", price=dear, order=i)
        for i, n in enumerate(("east", "west"))
    )
    rig, _ = rig_for(llm_deployments=deployments, llm_batch=False, llm_prices="", task_max_cost_usd=10.0)
    big = "# Part\n\n" + "word " * 12_000  # several chunks: some 20 USD at these prices, one about 4
    [big_id] = rig.submit(1, priority="default", doc=lambda i: big)
    [small_id] = rig.submit(1, priority="default")
    service = build_service(rig.container).start()
    try:
        rig.until(rig.finished([big_id, small_id]))
    finally:
        assert service.wait(30)
    over = rig.repo.get(big_id)
    assert over.status is TaskStatus.failed and over.usage is None, over.error
    assert "DOCLLM_TASK_MAX_COST_USD=10" in (over.error or "") and "at east" in (over.error or "")
    served = rig.repo.get(small_id)
    assert served.status is TaskStatus.success, served.error
    # Only the small document was sent: every request names its chunk, none of the big one's.
    assert llm.requests and all("word word" not in json.dumps(r) for r in llm.requests)
    view = spent(rig)
    assert view.spent_micro == micro(served.usage.cost_usd) and view.held_micro == 0


# -- (3) the batch lane at the daily cap -------------------------------------------------------------


def test_the_batch_lane_stops_at_the_daily_cap_and_counts_what_it_spent(rig_for):
    """A batch of two is held at its estimate (a fixed 1,000-token completion a line: several times
    what the test server bills) until it is applied, and then counts what it cost. With a cap of 1.35
    batch estimates a batch goes only when the last one was applied and released its hold, and after
    three the room left (the cap less three batches' cost) no longer fits a fourth: the lane stops at
    the cap, though the count stands far below it."""
    probe, _ = rig_for(batch_max_tasks=1)
    estimate = probe.container.spend_ledger().check_lines(probe.container.batch_target().priced, _lines(probe, DOC))
    assert estimate
    cap = 1.35 * 2 * estimate
    rig, llm = rig_for(batch_max_tasks=2, spend_cap_usd_per_day=cap)
    ids = rig.submit(20)
    seen: list[Any] = []
    service = build_service(rig.container).start()
    try:
        rig.until(lambda: seen.append(spent(rig)) or llm.batches.counters["batches_created"] >= 3)
        rig.until(lambda: len([b for b in rig.batches() if b.state is BatchState.applied]) >= 3)
        time.sleep(3 * rig.settings.batch_max_wait_seconds + 2 * DELAY + 1)  # a fourth would be out by now
        view = spent(rig)
        rows = rig.rows(ids)
    finally:
        assert service.wait(30)
    assert all(v.spent_micro + v.held_micro <= micro(cap) for v in [*seen, view])  # never past the cap
    assert llm.batches.counters["batches_created"] == 3, rig.batches()  # the cap held the lane
    done = [r for r in rows if r.status is TaskStatus.success]
    assert len(done) == 6
    assert view.spent_micro == sum(micro(r.usage.cost_usd) for r in done)  # each write counted once
    assert view.by_deployment == {"default": view.spent_micro}  # batch spend is the deployment's too
    assert view.held_micro == 0 and micro(cap) - view.spent_micro < micro(2 * estimate)  # no room for a fourth
    waiting = [r for r in rows if r.status is TaskStatus.pending]
    assert len(waiting) == 14 and all(r.retry_count == 0 and r.handbacks == 0 for r in waiting)


def _lines(rig: Rig, doc: str) -> list[dict[str, Any]]:
    from docllm.domain.batches.lines import request_lines

    t = rig.container.batch_target()
    return request_lines(1, 1, "d0.md", doc, None, t.model, t.max_chunk_chars)


# -- (4) two pollers, one batch, counted once --------------------------------------------------------


def test_two_pollers_applying_one_batch_count_its_spend_once(rig_for, monkeypatch):
    rig, llm = rig_for(spend_cap_usd_per_day=1000.0)
    ids, ref, batch, first, second, seen = two_pollers_on_a_completed_batch(rig)
    held = spent(rig)
    assert held.held_micro > 0 and held.spent_micro == 0  # reserved at create, nothing counted yet
    mine, theirs = member_attempts(first.proc, batch.members), member_attempts(second.proc, batch.members)
    token = first.leases.acquire(ref, "first", 60_000)
    assert token is not None
    first._apply(batch, seen, mine, token)
    # The second believes it still holds the lease and applies the same results: every commit it
    # tries finds the row success at the same attempt, written by the first.
    monkeypatch.setattr(type(second.leases), "renew", lambda *args, **kwargs: True)
    second._apply(batch, seen, theirs, "a lease it lost")
    monkeypatch.undo()
    rows = rig.rows(ids)
    assert {r.status for r in rows} == {TaskStatus.success}
    cost = sum(micro(r.usage.cost_usd) for r in rows)
    view = spent(rig)
    assert view.spent_micro == cost, (view.spent_micro, cost)  # once, not twice
    assert view.by_deployment == {"default": cost}
    assert view.held_micro == 0  # the batch's hold released at apply
    succeeded = [f for e, f in rig.events.events if e == "succeeded"]
    assert len(succeeded) == len(ids)  # and its successes logged once


# -- (6) prices and caps agree across the two forms --------------------------------------------------


def _env(deployments: list[dict[str, Any]], **extra: str) -> dict[str, str]:
    return {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments),
        "DOCLLM_DATABASE_URL": "sqlite:///x.db",
        **extra,
    }


def _one(name: str, prices: dict[str, float] | None = None, **more: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m-" + name}
    if prices is not None:
        entry["prices"] = prices
    return {**entry, **more}


@pytest.mark.parametrize(
    "cap",
    [
        {"DOCLLM_SPEND_CAP_USD_PER_DAY": "0.001"},
        {"DOCLLM_TASK_MAX_COST_USD": "0.05"},
        {},  # a deployment's own cap
    ],
)
def test_with_a_cap_an_unpriced_deployment_is_refused_at_start_naming_it(cap):
    east = _one("east", {"input": 1, "output": 2}, **({} if cap else {"spend_cap_usd_per_day": 1}))
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(_env([east, _one("west")], **cap))
    message = str(raised.value)
    assert "'west'" in message and "no price" in message and "\n" not in message
    assert "http" not in message and '"k"' not in message  # the inline JSON is never echoed


def test_a_cap_with_prices_only_on_the_deployments_is_accepted_and_priced_there():
    env = _env([_one("east", {"input": 1, "output": 2}), _one("west", {"input": 3, "output": 4})])
    settings = Settings.from_env({**env, "DOCLLM_SPEND_CAP_USD_PER_DAY": "5", "DOCLLM_TASK_MAX_COST_USD": "0.5"})
    from docllm.container import priced_deployments

    prices = {p.name: p.price for p in priced_deployments(settings)}
    assert prices == {"east": Price(1.0, 2.0), "west": Price(3.0, 4.0)}


def test_a_deployment_without_its_own_price_takes_the_price_tables():
    env = _env([_one("east", {"input": 1, "output": 2}), _one("west")])
    settings = Settings.from_env({**env, "DOCLLM_SPEND_CAP_USD_PER_DAY": "5", "DOCLLM_LLM_PRICES": "m-west=7/8"})
    from docllm.container import priced_deployments

    assert {p.name: p.price for p in priced_deployments(settings)} == {"east": Price(1, 2), "west": Price(7, 8)}


def test_without_a_cap_an_unpriced_deployment_is_fine():
    Settings.from_env(_env([_one("east"), _one("west")]))
