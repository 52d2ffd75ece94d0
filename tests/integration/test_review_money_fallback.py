"""Hostile review of branch `money` (issue 43 part A): the spend ledger with DOCLLM_LLM_DEPLOYMENTS
when a chunk falls back to another deployment (the router's ProviderUnavailable fallback, which
exists on `money`). The container's wiring on a real redis-server and SQLite, the real ``openai``
client against two test servers: ``east`` (order 0) answers 500 to everything, ``west`` (order 1)
serves. The ledger reserves every attempt at ``east`` only, so ``west``'s price and ``west``'s own
cap are never looked at."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from docllm.domain.llm.budget import micro
from docllm.domain.llm.deployments import Deployment
from docllm.domain.llm.prices import Price
from docllm.domain.tasks.model import TaskStatus
from docllm.entrypoints.bootstrap import build_service
from tests.integration.test_batch_lane import Rig, make_settings
from tests.support.llm_server import FakeLLM

CHEAP = Price(1.0, 4.0)  # USD per 1M tokens
DEAR = Price(1000.0, 4000.0)


@pytest.fixture
def two(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., tuple[Rig, FakeLLM, FakeLLM]]]:
    servers: list[FakeLLM] = []

    def make(east: dict[str, Any], west: dict[str, Any], east_down: bool = True, **over: Any):
        e = FakeLLM(rate_500=1.0 if east_down else 0.0).start()
        w = FakeLLM().start()
        servers.extend((e, w))
        deployments = (
            Deployment(name="east", base_url=e.base_url, model="test-model", api_key="k", order=0, **east),
            Deployment(name="west", base_url=w.base_url, model="test-model", api_key="k", order=1, **west),
        )
        values = dict(llm_deployments=deployments, llm_batch=False, llm_prices="", **over)
        return Rig(make_settings(tmp_path, redis_url, e, **values)), e, w

    yield make
    for s in servers:
        s.stop()


def _run_until(rig: Rig, done: Callable[[], bool], seconds: float) -> None:
    service = build_service(rig.container).start()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not done():
            time.sleep(0.1)
    finally:
        assert service.wait(30)


def test_review_a_fallback_deployments_own_daily_cap_is_never_checked(two):
    """west's spend_cap_usd_per_day is 0.5 USD; east is down, so every chunk goes to west. The ledger
    reserved at east (no cap of its own) and never at west: west serves and spends far past its cap."""
    rig, east, west = two(east=dict(price=DEAR), west=dict(price=DEAR, spend_cap_usd=0.5))
    ids = rig.submit(8, priority="default")
    _run_until(rig, rig.finished(ids), 40)
    view = rig.container.spend_budget().view()
    west_spent = view.by_deployment.get("west", 0)
    assert west.requests, "west served nothing: the test proves nothing"
    # The promise: every cap, the deployment's too, checked at the reservation; spend never passes
    # a cap by more than what is held in flight.
    assert west_spent <= micro(0.5) + view.held_by_deployment.get("west", 0), (
        f"west spent {west_spent / 1e6:.4f} USD against its own cap of 0.5 USD",
        [r.status for r in rig.rows(ids)],
    )


def test_review_the_per_task_cap_is_checked_at_the_first_deployments_price_not_where_it_is_sent(two):
    """DOCLLM_TASK_MAX_COST_USD=0.05. The document is estimated far under it at east's price, far
    over it at west's. east is down, so west would serve it: the per-task cap is checked at the
    dearest deployment the router may send a chunk to, so it is refused before any request (the
    review found it paid 14 times the cap at west)."""
    rig, east, west = two(east=dict(price=CHEAP), west=dict(price=DEAR), task_max_cost_usd=0.05)
    [task_id] = rig.submit(1, priority="default")
    _run_until(rig, rig.finished([task_id]), 40)
    row = rig.repo.get(task_id)
    assert row.status is TaskStatus.failed and "DOCLLM_TASK_MAX_COST_USD=0.05" in (row.error or ""), row.error
    assert "at west" in (row.error or "")  # priced where it could go
    assert not west.requests and not east.requests  # refused before any request
    assert row.usage is None


def test_review_the_fleet_cap_passes_by_far_more_than_is_held_when_the_fallback_is_dearer(two):
    """DOCLLM_SPEND_CAP_USD_PER_DAY=0.5. Reservations are made at east's (cheap) estimate; every
    chunk is served and counted at west's (dear) price. After the run nothing is held, yet the
    day's counted spend is several times the cap."""
    rig, east, west = two(east=dict(price=CHEAP), west=dict(price=DEAR), spend_cap_usd_per_day=0.5)
    ids = rig.submit(8, priority="default")
    _run_until(rig, rig.finished(ids), 40)
    view = rig.container.spend_budget().view()
    assert west.requests, "west served nothing: the test proves nothing"
    # The invariant: the day's counted spend never passes a cap by more than the
    # reservations in flight allow.
    assert view.spent_micro <= micro(0.5) + view.held_micro, (
        f"spent {view.spent_micro / 1e6:.4f} USD, held {view.held_micro / 1e6:.4f}, cap 0.5 USD"
    )


def test_review_the_first_deployment_at_its_own_cap_stalls_work_a_healthy_second_one_could_do(two):
    """east has a daily cap of 0.000001 USD (it is spent); west is healthy with no cap. Every attempt
    is reserved at east, refused at east's cap and handed back for 60 s, again and again: nothing is
    served though west has room (the ledger's promise is per-deployment caps, not "the first
    deployment's cap stops the fleet")."""
    rig, east, west = two(east=dict(price=DEAR, spend_cap_usd=0.000001), west=dict(price=DEAR), east_down=False)
    ids = rig.submit(2, priority="default")
    _run_until(rig, rig.finished(ids), 20)
    rows = rig.rows(ids)
    assert all(r.status is TaskStatus.success for r in rows), [(r.status, r.error) for r in rows]
