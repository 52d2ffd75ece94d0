"""Two LLM deployments on real processes (issue 27, ARCHITECTURE.md, Deployments): two worker
processes, two OpenAI-compatible test servers, the first preferred (``order``). It goes down mid-run
(connection refused): the work goes on at the second, with no gap in answers longer than one
breaker interval, no attempt charged and no task handed back; it comes back and, after its
breaker's probe, takes the work again. Every task is committed once (the database's audit), and
``stats`` shows each deployment's spend today, the two making up the fleet's."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Harness, Probe, wait_until, write_documents
from tests.e2e.harness.audit import commits, install_commit_audit
from tests.support.llm_server import FakeLLM, Reply

pytestmark = pytest.mark.e2e

OPEN_S = 4.0  # DOCLLM_BREAKER_OPEN_SECONDS: the breaker interval the pause is held to
LATENCY_MS = (400, 800)
# What may pass between two answers besides the breaker interval: a chunk in flight at the killed
# server fails at once (connection closed), then waits up to one answer at the second; the rest
# is a loaded machine's scheduling.
MARGIN_S = LATENCY_MS[1] / 1000 + 2.0


class TimedLLM(FakeLLM):
    """The test server, plus when each chat request came."""

    def __init__(self, **kwargs: Any):
        super().__init__(latency_ms=LATENCY_MS, **kwargs)
        self.came: list[float] = []

    def answer(self, method: str, path: str, headers: dict[str, str], body: Any) -> Reply:
        if path.endswith("/chat/completions"):
            self.came.append(time.monotonic())
        return super().answer(method, path, headers, body)


def requests(*servers: TimedLLM | None) -> list[float]:
    return sorted(t for llm in servers if llm is not None for t in list(llm.came))


@pytest.mark.timeout(300)
@pytest.mark.long(40)
def test_the_first_deployment_goes_down_and_comes_back_without_a_pause_or_a_charge(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    install_commit_audit(probe)
    write_documents(tmp_path / "first", 60, "doc")
    write_documents(tmp_path / "then", 30, "doc", start=61)
    first, second = TimedLLM().start(), TimedLLM().start()
    port = first.port
    prices = {"input": 1.0, "output": 4.0}  # each deployment's own: spend is counted per deployment
    deployments: list[dict[str, Any]] = [
        {"name": "primary", "base_url": first.base_url, "api_key": "k1", "model": "test-model", "order": 0},
        {"name": "secondary", "base_url": second.base_url, "api_key_env": "SECOND_KEY", "model": "test-model"},
    ]
    for d in deployments:
        d["prices"] = prices
    deployments[1]["order"] = 1
    env = {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments),
        "SECOND_KEY": "k2",
        "DOCLLM_BREAKER_OPEN_SECONDS": str(OPEN_S),
        "DOCLLM_LLM_TIMEOUT_SECONDS": "30",
    }
    ids = {t["task_id"] for t in harness.submit(sorted((tmp_path / "first").glob("*.md")))}
    harness.worker("w1", env)
    harness.worker("w2", env)

    def rows() -> dict[int, dict]:
        return probe.rows(False)

    def done() -> int:
        return sum(r["status"] == "success" for r in rows().values())

    back: TimedLLM | None = None
    try:
        wait_until(lambda: done() >= 10, 90, "the first answers", on_timeout=harness.dump)
        assert second.came == [], "the second deployment was used while the first served"
        first.stop()  # connection refused from now on
        down_at = time.monotonic()
        wait_until(lambda: done() >= 40, 90, "work to go on at the second deployment", on_timeout=harness.dump)
        # Requests reaching either server from the stop on: no gap longer than one breaker interval.
        sent = [down_at, *(t for t in requests(first, second) if t >= down_at)]
        longest = max(b - a for a, b in zip(sent, sent[1:], strict=False))
        assert longest <= OPEN_S + MARGIN_S, (longest, sent)

        back = TimedLLM(port=port).start()  # the first comes back on its address
        ids |= {t["task_id"] for t in harness.submit(sorted((tmp_path / "then").glob("*.md")))}
        wait_until(
            lambda: all(rows()[i]["status"] == "success" for i in ids), 120, "every task", on_timeout=harness.dump
        )
        assert back.came, "the first deployment never took work again after it came back"
    finally:
        for llm in (first, second, back):
            if llm is not None:
                llm.stop()

    final = rows()
    assert {i: final[i]["retry_count"] for i in ids if final[i]["retry_count"]} == {}, "attempts charged"
    assert not harness.events("released"), "tasks were handed back: the outage of one deployment reached them"
    assert {i: a for i, a in commits(probe).items() if len(a) != 1} == {}, "a task committed more than once"
    assert set(commits(probe)) == ids
    served_by = harness.cli_json("show", str(max(ids)))

    # Each deployment's share of today's spend, added in the same script call as the fleet's: both
    # served, and together they are the fleet's count (each share rounded to the micro-dollar).
    llm = harness.cli_json("stats", env=env)["llm"]
    primary_usd = llm["deployment-primary"]["spend_usd_today"]
    secondary_usd = llm["deployment-secondary"]["spend_usd_today"]
    fleet_usd = llm["budget"]["spent_usd_today"]
    assert abs(primary_usd + secondary_usd - fleet_usd) <= 5e-6, (primary_usd, secondary_usd, fleet_usd)
    assert primary_usd > 0 and secondary_usd > 0, (primary_usd, secondary_usd)
    print(
        f"longest gap between answers after the first went down: {longest:.2f} s (interval {OPEN_S:g} s); "
        f"requests: first {len(first.came)}, second {len(second.came)}, first back {len(back.came if back else [])}; "
        f"last task served by {served_by.get('result', {}).get('deployments')}; spend today: primary "
        f"{primary_usd:.6f}, secondary {secondary_usd:.6f}, fleet {fleet_usd:.6f} USD"
    )
