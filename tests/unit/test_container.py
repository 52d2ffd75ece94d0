"""The container builds every service from settings, and tests override providers, not modules."""

import fakeredis
from dependency_injector import providers

from docllm.container import Container
from docllm.settings import Settings
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository


def test_services_are_wired_from_settings_with_overridden_ports():
    settings = Settings.from_env(
        {
            "DOCLLM_MAX_ATTEMPTS": "7",
            "DOCLLM_LEASE_SECONDS": "12",
            "DOCLLM_RECONCILE_GRACE_SECONDS": "90",
            "DOCLLM_WORKER_ID": "w-9",
        }
    )
    clock = ManualClock()
    c = Container()
    c.settings.override(providers.Object(settings))
    c.clock.override(providers.Object(clock))
    c.queue.override(providers.Object(InMemoryTaskQueue(clock)))
    c.repository.override(providers.Object(InMemoryTaskRepository(clock)))
    proc, reaper, rec = c.processor(), c.reaper(), c.reconciler()
    assert proc.worker_id == "w-9" and proc.retry.max_attempts == 7 and proc.lease.lease_ms == 12_000
    assert proc.queue.queue is c.queue() and reaper.queue is c.queue()  # the processor's acks are grouped
    assert reaper.repo is c.repository() and reaper.worker_id == "w-9"
    assert rec.grace_ms == 90_000 and rec.clock is clock
    assert c.reviewer().name == "offline"


def test_the_real_redis_adapter_is_built_from_a_client():
    c = Container()
    c.settings.override(providers.Object(Settings.from_env({"DOCLLM_QUEUE_PREFIX": "{q}"})))
    c.redis_client.override(providers.Object(fakeredis.FakeRedis()))
    c.clock.override(providers.Object(ManualClock()))
    queue = c.queue()
    queue.push('{"task_id": 1}')
    assert queue.stats().ready == 1 and queue.keys.ready == "{q}:queue:ready"


def test_the_batch_lanes_store_and_leases_are_built_over_the_engine_and_the_queues_redis():
    from docllm.adapters.redis.batch_leases import RedisBatchLeases
    from docllm.adapters.sql.batches import SqlAlchemyBatchStore

    c = Container()
    c.settings.override(providers.Object(Settings.from_env({"DOCLLM_QUEUE_PREFIX": "{q}"})))
    c.redis_client.override(providers.Object(fakeredis.FakeRedis()))
    c.engine.override(providers.Object(object()))  # never touched: building the store runs no query
    c.clock.override(providers.Object(ManualClock()))
    assert isinstance(c.batch_store(), SqlAlchemyBatchStore)
    leases = c.batch_leases()
    assert isinstance(leases, RedisBatchLeases) and leases.acquire("r", "w-1", 1000) is not None
    assert c.queue().keys.batch_lease("r") == "{q}:batch:lease:r"


def test_openai_provider_builds_the_openai_reviewer():
    c = Container()
    c.settings.override(
        providers.Object(
            Settings.from_env(
                {
                    "DOCLLM_LLM_PROVIDER": "openai",
                    "DOCLLM_LLM_API_KEY": "k",
                    "DOCLLM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                }
            )
        )
    )
    assert c.reviewer().name == "openai"


def test_several_deployments_build_a_routed_reviewer_with_a_breaker_and_limits_each():
    import asyncio
    import json

    from docllm.adapters.llm.routed_reviewer import RoutedReviewer

    deployments = [
        {"name": "east", "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m", "rpm": 5},
        {"name": "west", "base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m2", "order": 1},
    ]
    env = {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments),
        "DOCLLM_QUEUE_PREFIX": "{q}",
    }
    c = Container()
    c.settings.override(providers.Object(Settings.from_env(env)))
    c.redis_client.override(providers.Object(fakeredis.FakeRedis()))
    c.clock.override(providers.Object(ManualClock()))

    async def built() -> RoutedReviewer:
        reviewer = c.reviewer()  # on a loop: the HTTP pools belong to it
        await reviewer.close()
        return reviewer

    reviewer = asyncio.run(built())
    assert isinstance(reviewer, RoutedReviewer) and [d.name for d in reviewer.deployments] == ["east", "west"]
    east, west = reviewer.routes["east"], reviewer.routes["west"]
    assert east.breaker._key != west.breaker._key and east.breaker._key.startswith("{q}:llm:breaker:")
    assert east.limiter is not None and west.limiter is None  # west sets no limit
    assert east.reviewer.deployment == "east" and west.reviewer.model == "m2"
    assert c.rate_limiter() is None  # the fleet-wide single limiter is the one deployment's only


def test_two_keys_on_one_url_and_model_are_two_deployments_with_a_breaker_and_limits_each():
    """Breakers and limits are keyed by the deployment's name (issue 43): two keys (two accounts)
    on one URL and model share neither."""
    import asyncio
    import json

    from docllm.adapters.llm.routed_reviewer import RoutedReviewer

    same = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "rpm": 5}
    deployments = [{"name": "team-a", "api_key": "k1", **same}, {"name": "team-b", "api_key": "k2", "order": 1, **same}]
    env = {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments),
        "DOCLLM_QUEUE_PREFIX": "{q}",
    }
    c = Container()
    c.settings.override(providers.Object(Settings.from_env(env)))
    c.redis_client.override(providers.Object(fakeredis.FakeRedis()))
    c.clock.override(providers.Object(ManualClock()))

    async def built() -> RoutedReviewer:
        reviewer = c.reviewer()
        await reviewer.close()
        return reviewer

    routes = asyncio.run(built()).routes
    a, b = routes["team-a"], routes["team-b"]
    assert a.breaker._key != b.breaker._key
    assert a.limiter.key != b.limiter.key and a.limiter.key.startswith("{q}:llm:limit:")
