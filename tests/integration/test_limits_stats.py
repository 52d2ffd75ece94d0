"""``docllm stats`` shows the fleet's LLM rate limits under "llm" -> "limits" (real Redis, SQLite)."""

from __future__ import annotations

import json
import uuid

import redis

from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.rate_limiter import RedisRateLimiter
from docllm.entrypoints.cli import main

BASE_URL = "http://127.0.0.1:9/v1"


def test_stats_shows_the_headroom_of_the_limits(redis_url, tmp_path, monkeypatch, capsys):
    prefix = f"{{lim{uuid.uuid4().hex[:6]}}}"
    env = {
        "DOCLLM_REDIS_URL": redis_url,
        "DOCLLM_DATABASE_URL": f"sqlite:///{tmp_path / 'docllm.db'}",
        "DOCLLM_QUEUE_PREFIX": prefix,
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_API_KEY": "k",
        "DOCLLM_LLM_BASE_URL": BASE_URL,
        "DOCLLM_LLM_MODEL": "m",
        # 6 a minute: one request's room comes back after 10 s, far more than a busy machine takes
        # between the acquire below and the stats that must see it spent (at 120 a minute, 0.5 s).
        "DOCLLM_LLM_RPM": "6",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def stats() -> dict:
        assert main(["stats", "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    assert main(["init-db"]) == 0
    capsys.readouterr()
    limits = stats()["llm"]["limits"]
    assert limits["model"] == "m" and limits["rpm"] == 6 and limits["tpm"] is None
    assert limits["requests_available"] == 1 and limits["hold_s"] == 0.0

    client = redis.Redis.from_url(redis_url)
    worker = RedisRateLimiter(client, prefix, RedisServerClock(client), BASE_URL, "m", rpm=6)
    assert worker.acquire(1) == 0
    assert stats()["llm"]["limits"]["requests_available"] == 0
    assert main(["stats"]) == 0
    assert "llm limits rpm" in capsys.readouterr().out

    monkeypatch.delenv("DOCLLM_LLM_RPM")
    assert "limits" not in stats()["llm"]  # no limit set: nothing to show (the breaker and usage are)
    client.close()
