"""The numbers KEDA scales the fleet on, read as KEDA reads them (tests/support/keda_read.py,
with the trigger metadata of the rendered deploy/kubernetes ScaledObject) from real docllm
processes on real redis-server and MariaDB: a backlog only in the bulk lane, or only in a tenant's
queue, moves the waiting work; a batch's members (claimed by the batcher's claim, under leases)
count in neither number; the realtime attempts running are the busy number."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.lanes.model import BATCH_LANE
from docllm.domain.llm.budget import micro
from tests.e2e.harness import Harness, wait_until, write_documents
from tests.servers.ports import free_port
from tests.support import keda_read
from tests.unit.test_kubernetes_manifests import KUBERNETES, render

pytestmark = pytest.mark.e2e


def _triggers() -> dict[str, dict[str, Any]]:
    (scaler,) = [d for d in render(KUBERNETES / "overlays" / "external") if d["kind"] == "ScaledObject"]
    return {t["name"]: t["metadata"] for t in scaler["spec"]["triggers"]}


def _submit(harness: Harness, directory: Path, count: int, tag: str, *options: str) -> list[int]:
    write_documents(directory / tag, count, tag)
    paths = sorted(str(p) for p in (directory / tag).iterdir())
    return [t["task_id"] for t in harness.cli_json("submit", *paths, *options)]


def test_keda_reads_every_lane_and_tenant_and_not_the_batch_members(
    harness: Harness, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    triggers = _triggers()
    ports = {"reaper": free_port(), "worker": free_port()}
    endpoints = {name: f"http://127.0.0.1:{port}/metrics" for name, port in ports.items()}
    # The Services' pods (base/metrics.yaml): the waiting work from the workers and the reaper,
    # the busy number from the workers.
    serves = {"waiting": ["reaper", "worker"], "busy": ["reaper", "worker"]}

    def keda(trigger: str) -> float | None:
        meta = triggers[trigger]
        assert meta["format"] == "prometheus" and meta["aggregateFromKubeServiceEndpoints"] == "true"
        try:
            return keda_read.aggregate(
                [endpoints[p] for p in serves[trigger]], meta["valueLocation"], meta["aggregationType"]
            )
        except keda_read.NotRead:
            return None  # KEDA: an error for this poll (the fallback counts them)

    def metric(text: str) -> float:
        return keda_read.read(endpoints["reaper"], text)

    http = {"DOCLLM_METRICS_HOST": "127.0.0.1"}
    harness.reaper("reaper", {**http, "DOCLLM_METRICS_PORT": str(ports["reaper"])})
    wait_until(lambda: keda("waiting") == 0, 60, "the reaper's /metrics", on_timeout=harness.dump)
    assert keda("busy") == 0  # no worker yet: the reaper's 0, read without an error

    # A backlog only in the bulk lane moves the number, and only in a tenant's queue too.
    _submit(harness, tmp_path, 3, "bulk", "--priority", "bulk")
    assert keda("waiting") == 3
    _submit(harness, tmp_path, 2, "acme", "--tenant", "acme")
    _submit(harness, tmp_path, 2, "beta", "--tenant", "beta", "--priority", "bulk")
    _submit(harness, tmp_path, 1, "urgent", "--priority", "interactive")
    assert keda("waiting") == 8

    # The batch lane's batcher claims the bulk lane alone (domain/batches/batcher.py) and holds the
    # leases while its batch waits on the provider, renewing them (Batcher.keep): its members leave
    # the waiting work.
    lease_ms = int(float(harness.env["DOCLLM_LEASE_SECONDS"]) * 1000)
    client = redis.Redis.from_url(harness.env["DOCLLM_REDIS_URL"])
    queue = RedisTaskQueue(client, harness.prefix)
    members = queue.claim_batch("batcher", lease_ms, 10, (BATCH_LANE,))
    assert len(members) == 5
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(lease_ms / 3000):
            assert all(queue.extend_many([m.token for m in members], lease_ms))

    keeper = threading.Thread(target=keep, daemon=True)
    keeper.start()

    def finish() -> None:
        stop.set()
        keeper.join(10)
        client.close()

    request.addfinalizer(finish)
    assert keda("waiting") == 3
    assert metric('docllm_queue_depth{queue="processing"}') == 5  # what the old "processing" trigger read

    # A worker takes the realtime work: its attempts are the busy number; the batch's members are not.
    worker_env = {
        **http,
        "DOCLLM_METRICS_PORT": str(ports["worker"]),
        "DOCLLM_CONCURRENCY": "2",
        "DOCLLM_OFFLINE_LATENCY_SECONDS": "60",  # still running while the test reads
        "DOCLLM_LLM_BATCH": "off",
    }
    harness.worker("worker", worker_env)
    wait_until(lambda: keda("busy") == 2, 60, "the worker's two attempts", on_timeout=harness.dump)
    assert keda("waiting") == 1  # three realtime tasks, two running
    assert metric('docllm_queue_depth{queue="processing"}') == 7
    assert keeper.is_alive()  # the members' leases held throughout


def test_a_reached_spend_cap_asks_for_no_worker(harness: Harness, tmp_path: Path) -> None:
    """Review of issue 47, hole 1: while the fleet's spend cap is reached no worker claims
    (runtime/budget_gate.py), so the tasks that keep arriving must not take the fleet to its
    ceiling to idle there until midnight. Raising the cap brings them back."""
    meta = _triggers()["waiting"]
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    priced = {"DOCLLM_LLM_PRICES": "gpt-4o-mini=0.15/0.6"}  # spend is counted (and capped) where calls are priced
    harness.reaper("reaper", {**priced, "DOCLLM_METRICS_HOST": "127.0.0.1", "DOCLLM_METRICS_PORT": str(port)})
    wait_until(lambda: _read(url, meta["valueLocation"]) == 0, 60, "the reaper's /metrics", on_timeout=harness.dump)
    with redis.Redis.from_url(harness.env["DOCLLM_REDIS_URL"]) as client:
        budget = RedisSpendBudget(client, harness.prefix, RedisTaskQueue(client, harness.prefix))
        budget.set_cap(1.0)
        assert budget.add(micro(2.0)).over  # today's spend is past the cap: no process claims
        _submit(harness, tmp_path, 16, "capped")
        assert _read(url, 'docllm_queue_depth{queue="ready"}') == 16  # they wait, on the board
        assert _read(url, meta["valueLocation"]) == 0  # and ask for no worker
        budget.set_cap(10.0)  # raised: they may be claimed again
        assert _read(url, meta["valueLocation"]) == 16


def _read(url: str, value_location: str) -> float | None:
    try:
        return keda_read.read(url, value_location)
    except keda_read.NotRead:
        return None
