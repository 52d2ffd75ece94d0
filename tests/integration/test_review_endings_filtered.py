"""Review (issue 43, deployments fail alone): a refusal that is the DOCUMENT's (a content filter
answering 403 for this document on every deployment, the case the verdict calls "a filtering
403") must not open the deployments' breakers. The product's wiring, real redis-server and SQLite,
two OpenAI-compatible test servers that both answer 403 to a document containing FILTERED and
serve every other document."""

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
from tests.support.llm_server import FakeLLM, Reply, error

MIN_CALLS = 3


class Filtering(FakeLLM):
    """A provider whose content filter answers 403 for a document containing FILTERED."""

    def _chat(self, body: dict) -> Reply:
        if any("FILTERED" in str(m.get("content") or "") for m in body.get("messages", [])):
            return error(403, "The request was blocked by the content filter.", code="content_filter")
        return super()._chat(body)


def _env(tmp_path: Path, redis_url: str, a: FakeLLM, b: FakeLLM) -> dict[str, str]:
    deployments = [
        {"name": "primary", "base_url": a.base_url, "api_key": "k1", "model": "test-model", "order": 0},
        {"name": "backup", "base_url": b.base_url, "api_key": "k2", "model": "test-model", "order": 1},
    ]
    return {
        "DOCLLM_HOME": str(tmp_path),
        "DOCLLM_REDIS_URL": redis_url,
        "DOCLLM_DATABASE_URL": f"sqlite:///{tmp_path}/docllm.db",
        "DOCLLM_QUEUE_PREFIX": "{docllm}",
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments),
        "DOCLLM_MAX_ATTEMPTS": "1",
        "DOCLLM_BREAKER_MIN_CALLS": str(MIN_CALLS),
        "DOCLLM_BREAKER_OPEN_SECONDS": "600",
        # The fleet's breaker hears each judged refusal as a failure and a passing check (1 of 2): kept
        # shut here, so what this test sees is the deployments' breakers alone.
        "DOCLLM_BREAKER_FAILURE_RATIO": "0.9",
        "DOCLLM_CONCURRENCY": "1",
        "DOCLLM_WORKER_ID": "w1",
        "DOCLLM_LLM_TIMEOUT_SECONDS": "10",
    }


def _wait(repo, ids, seconds: float = 40) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if all(repo.get(i).status in (TaskStatus.success, TaskStatus.failed) for i in ids):
            return
        time.sleep(0.05)


def test_documents_a_content_filter_refuses_do_not_take_every_deployment_out(tmp_path: Path, redis_url: str):
    with Filtering() as a, Filtering() as b:
        settings = Settings.from_env(_env(tmp_path, redis_url, a, b))
        container = build_container(settings, log=False)
        prepare_schema(container)
        repo, queue = container.repository(), container.queue()
        service = build_service(container, http=False).start()
        try:
            bad = [submit(repo, queue, f"bad{i}.md", "# Bad\n\nFILTERED words\n").task_id for i in range(MIN_CALLS + 1)]
            _wait(repo, bad[:2])
            # The documents' fault: they fail (refused), as with one provider.
            assert all(repo.get(i).status is TaskStatus.failed for i in bad[:2]), [repo.get(i).error for i in bad]
            good = [submit(repo, queue, f"good{i}.md", "# Fine\n\nShip it.\n").task_id for i in range(3)]
            _wait(repo, good, 30)
        finally:
            assert service.wait(30)
        rows = [repo.get(i) for i in good]
        stuck = [(repo.get(i).status, repo.get(i).handbacks) for i in bad]
        keys = RedisKeys(settings.queue_prefix)
        states = {
            name: RedisLlmBreaker(
                container.redis_client(),
                keys,
                container.clock(),
                breaker_policy(settings),
                key=breaker_key(keys, llm.base_url, "test-model", name),
            )
            .view()
            .state
            for name, llm in (("primary", a), ("backup", b))
        }
        # A document every deployment refuses is the document's (the router says so itself): no
        # deployment failed, so no deployment's breaker opens for it.
        assert states == {"primary": BreakerState.closed, "backup": BreakerState.closed}
        # Healthy deployments serve healthy documents: a few filtered documents are no outage.
        assert [r.status for r in rows] == [TaskStatus.success] * 3, (
            [(r.status, r.handbacks, r.error) for r in rows],
            stuck,
        )
