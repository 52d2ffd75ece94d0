"""Per-tenant wait and throughput (issue 44) on real Redis and SQLite, as an operator reads them:
``docllm stats --json``, the dashboard and /metrics show a tenant whose work all started and ended
within the window (its p50/p95 of submit-to-start and its done count), and the tenant labels of
the metrics stay bounded: the top N tenants, then ``(other)``."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from docllm.adapters.telemetry.lane_metrics import LaneGauges
from docllm.container import Container
from docllm.domain.lanes.figures import OTHERS, SHOWN_TOP_TENANTS, SHOWN_WINDOW_S
from docllm.domain.tasks.producer import submit
from docllm.entrypoints.bootstrap import build_container
from docllm.entrypoints.dashboard.app import Sources, create_app
from docllm.entrypoints.snapshot import stats_of
from docllm.settings import Settings
from tests.support.cli_runner import cli_runner
from tests.support.fake_worker_registry import InMemoryWorkerRegistry


@pytest.fixture
def world(redis_url: str, tmp_path, monkeypatch) -> Iterator[Container]:
    from docllm.adapters.sql.migrations import upgrade_schema

    url, prefix = f"sqlite:///{tmp_path / 'docllm.db'}", f"tf{uuid.uuid4().hex[:6]}"
    for name, value in (("DOCLLM_REDIS_URL", redis_url), ("DOCLLM_DATABASE_URL", url), ("DOCLLM_QUEUE_PREFIX", prefix)):
        monkeypatch.setenv(name, value)
    c = build_container(
        replace(Settings.from_env({}), redis_url=redis_url, database_url=url, queue_prefix=prefix), log=False
    )
    upgrade_schema(c.engine())
    yield c
    c.shutdown_resources()


def run_all(c: Container, tenant: str, n: int) -> None:
    """``n`` tasks of ``tenant`` submitted, started and committed, as a worker does."""
    repo, queue = c.repository(), c.queue()
    for i in range(n):
        submit(repo, queue, f"{tenant}-{i}.md", "# T\n\ntext\n", tenant=tenant)
    for _ in range(n):
        delivery = queue.claim("w1", 30_000)
        assert delivery is not None
        task_id = json.loads(delivery.raw)["task_id"]
        row = repo.start_attempt(task_id, delivery.token).task
        assert row is not None and repo.commit(task_id, row.attempt, {"findings": [], "summary": "ok"})
        assert queue.ack(delivery.token)


def metrics_of(c: Container) -> str:
    registry = CollectorRegistry()
    registry.register(LaneGauges(lambda: c.repository().lane_figures(SHOWN_WINDOW_S, SHOWN_TOP_TENANTS)))
    return generate_latest(registry).decode()


def test_a_tenant_whose_work_all_ended_shows_its_waits_and_done_count_everywhere(world: Container, capsys):
    run_all(world, "finished-co", 3)
    submit(world.repository(), world.queue(), "later.md", "# T\n", tenant="busy-co")  # work left
    code, out, _ = cli_runner(capsys)("stats", "--json")
    assert code == 0
    shown = {row["tenant"]: row for row in json.loads(out)["lanes"]["by_tenant"]}
    done = shown["finished-co"]
    assert (done["depth"], done["in_flight"], done["finished"]) == (0, 0, 3)
    assert done["wait_p50_s"] is not None and done["wait_p95_s"] is not None and done["wait_samples"] == 3
    assert done["done_per_min"] == round(3 * 60 / SHOWN_WINDOW_S, 3)

    page = (
        create_app(
            Sources(
                world.repository(),
                world.queue(),
                lambda: stats_of(world),
                InMemoryWorkerRegistry(world.queue().now_ms),
                world.events(),
            )
        )
        .test_client()
        .get("/")
        .get_data(as_text=True)
    )
    tenants = re.search(r'<table class="list" id="tenants">(.*?)</table>', page, re.S)
    assert tenants is not None and 'data-tenant="finished-co"' in tenants.group(1)

    text = metrics_of(world)
    assert 'docllm_tenant_finished{tenant="finished-co"} 3.0' in text
    assert re.search(r'docllm_tenant_wait_seconds\{quantile="0.95",tenant="finished-co"\} \d', text)
    assert 'docllm_tenant_done_per_minute{tenant="finished-co"}' in text


def test_tenant_labels_are_the_top_n_and_one_other(world: Container):
    for i in range(SHOWN_TOP_TENANTS + 3):
        run_all(world, f"t{i:02d}", 1)
    text = metrics_of(world)
    labels = set(re.findall(r'docllm_tenant_finished\{tenant="([^"]+)"\}', text))
    assert len(labels) == SHOWN_TOP_TENANTS + 1 and OTHERS in labels
    assert f'docllm_tenant_finished{{tenant="{OTHERS}"}} 3.0' in text  # the three beyond the top N
    figures = world.repository().lane_figures(SHOWN_WINDOW_S, SHOWN_TOP_TENANTS)
    assert figures.others is not None and figures.others.finished == 3 and figures.others.wait_samples == 3
