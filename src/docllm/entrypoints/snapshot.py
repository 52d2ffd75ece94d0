"""What ``docllm stats --json`` prints, as one function of the container: the CLI and the
dashboard show the same numbers (and the LLM's state under "llm" where it is recorded, the
provider batches under "batches" once there is any)."""

from __future__ import annotations

from typing import Any

from docllm.container import Container
from docllm.domain.lanes.figures import SHOWN_TOP_TENANTS, SHOWN_WINDOW_S
from docllm.entrypoints import batch_view, lane_view, views


def stats_of(c: Container) -> dict[str, Any]:
    queue = c.queue()
    now_ms = queue.now_ms()
    result = views.stats_json(c.repository().counts(), queue.stats(), now_ms)
    limiter = c.rate_limiter()
    if limiter is not None:  # the fleet's LLM rate limits, when set (DOCLLM_LLM_RPM, DOCLLM_LLM_TPM)
        result.setdefault("llm", {})["limits"] = {"model": c.settings().llm_model, **limiter.headroom()}
    result.setdefault("llm", {})["usage"] = views.usage_json(*c.repository().usage_totals(3600))
    result.setdefault("llm", {})["breaker"] = views.breaker_json(c.breaker().view())
    budget = c.spend_budget().view()
    for deployment, breaker, limiter in c.deployment_health():  # several deployments: each one's own
        result["llm"][f"deployment-{deployment.name}"] = views.deployment_json(
            deployment,
            breaker.view(),
            limiter.headroom() if limiter is not None else None,
            budget.deployment_usd(deployment.name),
        )
    figures = c.repository().lane_figures(SHOWN_WINDOW_S, SHOWN_TOP_TENANTS)
    result["lanes"] = lane_view.lanes_json(figures)
    result["llm"]["budget"] = views.budget_json(budget)
    batches = batch_view.batches_json(c.batch_store(), now_ms)
    if batches is not None:  # absent while no batch was ever recorded (batch_view.py)
        result["batches"] = batches
    return result
