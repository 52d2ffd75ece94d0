"""A deployment that refuses fails alone (issue 43, ARCHITECTURE.md, Deployments), tried as a new
user would: the product's own wiring (``build_container``, ``build_service``: the worker, its LLM
gate, the routed reviewer with each deployment's breaker in Redis) on a real redis-server and
SQLite, two OpenAI-compatible test servers. ``primary`` answers 401 to everything (a revoked key),
``backup`` is healthy: ``backup`` serves every task, nothing is charged, counted or failed, and
``primary``'s breaker (keyed by its name) opens, so it is passed over."""

from __future__ import annotations

import json
import time
from pathlib import Path

from docllm.adapters.redis.breaker import RedisLlmBreaker
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.rate_limiter import breaker_key
from docllm.container import breaker_policy
from docllm.domain.llm.breaker import BreakerState
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.producer import submit
from docllm.entrypoints.bootstrap import build_container, build_service, prepare_schema
from docllm.settings import Settings
from tests.support.llm_server import FakeLLM

TASKS = 8
MIN_CALLS = 3  # DOCLLM_BREAKER_MIN_CALLS: refusals that open primary's breaker
DOC = "# Release checklist\n\nShip it on Friday.\n"


def chats(llm: FakeLLM) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in llm.requests)


def test_a_revoked_key_on_the_first_deployment_is_served_by_the_second_uncharged(tmp_path: Path, redis_url: str):
    with FakeLLM(unauthorized=True) as primary, FakeLLM() as backup:
        deployments = [
            {"name": "primary", "base_url": primary.base_url, "api_key": "revoked", "model": "test-model", "order": 0},
            {"name": "backup", "base_url": backup.base_url, "api_key": "k2", "model": "test-model", "order": 1},
        ]
        env = {
            "DOCLLM_HOME": str(tmp_path),
            "DOCLLM_REDIS_URL": redis_url,
            "DOCLLM_DATABASE_URL": f"sqlite:///{tmp_path}/docllm.db",
            "DOCLLM_QUEUE_PREFIX": "{docllm}",
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments),
            "DOCLLM_MAX_ATTEMPTS": "2",
            "DOCLLM_BREAKER_MIN_CALLS": str(MIN_CALLS),
            "DOCLLM_BREAKER_OPEN_SECONDS": "600",  # stays open for the whole test: no probe
            "DOCLLM_CONCURRENCY": "2",
            "DOCLLM_WORKER_ID": "w1",
            "DOCLLM_LLM_TIMEOUT_SECONDS": "10",
        }
        settings = Settings.from_env(env)
        container = build_container(settings, log=False)
        prepare_schema(container)
        repo, queue = container.repository(), container.queue()
        ids = [submit(repo, queue, f"d{i}.md", DOC).task_id for i in range(TASKS)]
        service = build_service(container, http=False).start()
        try:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                if all(repo.get(i).status in (TaskStatus.success, TaskStatus.failed) for i in ids):
                    break
                time.sleep(0.05)
        finally:
            assert service.wait(30)
        rows = [repo.get(i) for i in ids]
        assert all(r.status is TaskStatus.success for r in rows), [(r.task_id, r.status, r.error) for r in rows]
        assert [(r.attempt, r.retry_count, r.handbacks) for r in rows] == [(1, 0, 0)] * TASKS  # nothing charged
        assert all(r.result["deployments"] == ["backup"] for r in rows)
        assert chats(backup) == TASKS
        # Each refusal went to primary's breaker (its own key, by name), which opened: passed over since.
        assert MIN_CALLS <= chats(primary) <= MIN_CALLS + settings.concurrency
        keys = RedisKeys(settings.queue_prefix)
        key = breaker_key(keys, primary.base_url, "test-model", "primary")
        breaker = RedisLlmBreaker(container.redis_client(), keys, container.clock(), breaker_policy(settings), key=key)
        assert breaker.view().state is BreakerState.open
