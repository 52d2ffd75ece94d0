"""Every LLM deployment down (issue 27, ARCHITECTURE.md, Deployments): the real worker, its LLM gate
and a RoutedReviewer over two OpenAI-compatible test servers that refuse connections. Each
deployment's breaker opens, the attempts fail as the provider's (the fleet's breaker opens, this
process's own check fails): claims stop, nothing is charged, and the work waits. When one
deployment comes back its breaker's probe closes it, the fleet's check passes and claiming resumes:
every task ends ``success`` at that deployment after no charged attempt."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.llm.routed_reviewer import Route, RoutedReviewer
from docllm.domain.llm.breaker import BreakerPolicy, BreakerState
from docllm.domain.llm.deployments import Deployment
from docllm.domain.tasks.model import TaskStatus
from tests.support.llm_server import FakeLLM
from tests.support.memory.breaker import InMemoryLlmBreaker
from tests.support.runtime_rig import RealClock, Rig, run

TASKS = 6
OPEN_S = 0.5  # each deployment's breaker and the fleet's: probes come this often
FLEET = BreakerPolicy(window_seconds=10, failure_ratio=0.5, min_calls=2, open_seconds=OPEN_S)
DEPLOYMENT = BreakerPolicy(window_seconds=10, failure_ratio=0.5, min_calls=1, open_seconds=OPEN_S)
SETTLE_S = 2.0  # an attempt in flight at a refused connection ends well within this, even on a busy host
HELD_S = 8 * OPEN_S  # how long both stay down once claims stopped: many probe rounds


def routed(ports: dict[str, int]) -> RoutedReviewer:
    routes = []
    for order, (name, port) in enumerate(ports.items()):
        url = f"http://127.0.0.1:{port}/v1"
        d = Deployment(name=name, base_url=url, model="test-model", api_key="k", order=order)
        reviewer = OpenAIReviewer(url, "k", d.model, 2, deployment=name)
        routes.append(Route(d, reviewer, InMemoryLlmBreaker(RealClock(), DEPLOYMENT)))
    return RoutedReviewer(routes, "w", poll_seconds=0.05)


def test_every_deployment_open_pauses_claims_uncharged_and_one_coming_back_resumes_them():
    with FakeLLM() as east, FakeLLM() as west:
        ports = {"east": east.port, "west": west.port}
    # Both stopped: connection refused at each from the start.
    reviewer = routed(ports)
    # Real time: the rig's 0.3 s lease would expire on a loaded host (the reaper then charges a
    # task the worker still held: seen with five runs at once), so a lease no host stalls past.
    rig = Rig(reviewer, lease=5.0, threads=True, breaker=FLEET, concurrency=2)
    ids = rig.submit(TASKS)
    seen: dict[str, object] = {}

    def rows() -> list[Any]:
        return [rig.repo.get(i) for i in ids]

    async def scenario(rig: Rig) -> None:
        until = rig.reaping()
        await until(lambda: not rig.gate.open, timeout=30)  # the fleet's breaker or this process's own check
        await until(
            lambda: all(r.breaker.view().state is not BreakerState.closed for r in reviewer.routes.values()),
            timeout=30,
        )
        await asyncio.sleep(SETTLE_S)  # what was in flight when claims stopped ends
        claims = len(rig.queue.claims)
        await asyncio.sleep(HELD_S)
        seen["claims_while_down"] = len(rig.queue.claims) - claims
        seen["charged_while_down"] = [(r.task_id, r.retry_count) for r in rows() if r.retry_count]
        seen["open"] = {n: r.breaker.view().state for n, r in reviewer.routes.items()}
        with FakeLLM(port=ports["west"]):  # one of them comes back on its address
            back = time.monotonic()
            await until(lambda: all(r.status is TaskStatus.success for r in rows()), timeout=60)
            seen["resumed_after_s"] = time.monotonic() - back
            seen["west"] = reviewer.routes["west"].breaker.view().state
            await reviewer.close()

    run(rig, scenario)
    assert seen["claims_while_down"] == 0, seen  # no claim while every deployment is open
    assert seen["charged_while_down"] == [], seen
    assert seen["open"] != {"east": BreakerState.closed, "west": BreakerState.closed}
    assert seen["west"] is BreakerState.closed  # its probe found it back
    final = rows()
    assert all(r.status is TaskStatus.success and r.retry_count == 0 for r in final), [
        (r.task_id, r.status, r.retry_count, r.error) for r in final
    ]
    assert all(r.result is not None and r.result.get("deployments") == ["west"] for r in final)
    print(f"all {TASKS} tasks ended {seen['resumed_after_s']:.2f} s after one deployment came back")
