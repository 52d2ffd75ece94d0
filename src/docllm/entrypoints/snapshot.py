"""What ``docllm stats --json`` prints, as one function of the container: the CLI and the
dashboard show the same numbers (and the LLM's state under "llm" where it is recorded)."""

from __future__ import annotations

from typing import Any

from docllm.container import Container
from docllm.entrypoints import views


def stats_of(c: Container) -> dict[str, Any]:
    queue = c.queue()
    result = views.stats_json(c.repository().counts(), queue.stats(), queue.now_ms())
    limiter = c.rate_limiter()
    if limiter is not None:  # the fleet's LLM rate limits, when set (DOCLLM_LLM_RPM, DOCLLM_LLM_TPM)
        result.setdefault("llm", {})["limits"] = {"model": c.settings().llm_model, **limiter.headroom()}
    result.setdefault("llm", {})["usage"] = views.usage_json(*c.repository().usage_totals(3600))
    result.setdefault("llm", {})["breaker"] = views.breaker_json(c.breaker().view())
    result["llm"]["budget"] = views.budget_json(c.spend_budget().view())
    return result
