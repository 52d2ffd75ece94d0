"""The composition root: builds every adapter from the settings (ARCHITECTURE.md, Layers).

Entrypoints build one container; tests and the simulation override providers
(``container.queue.override(fake)``) instead of patching modules.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from dependency_injector import containers, providers

from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.leftovers import LeftoverSweep
from docllm.domain.tasks.policies import LeasePolicy, Limits, RetryPolicy
from docllm.domain.tasks.reaper import Reaper
from docllm.domain.tasks.reconciler import Reconciler
from docllm.runtime.port_calls import CLAIM_THREADS, threads_for
from docllm.settings import Settings


def _redis(settings: Settings) -> Iterator:
    from docllm.adapters.redis.client import make_redis_client

    client = make_redis_client(
        settings.redis_url,
        settings.embedded_redis_path,
        max_connections=threads_for(settings.concurrency) + CLAIM_THREADS + 8,
    )
    yield client
    client.close()


def _engine(settings: Settings) -> Iterator:
    from docllm.adapters.sql.engine import make_engine

    if settings.database_url.startswith("sqlite:///"):  # the embedded default: create its folder
        os.makedirs(os.path.dirname(os.path.abspath(settings.database_url[len("sqlite:///") :])), exist_ok=True)
    # A few connections, whatever the concurrency: the worker's writes go in groups (at most two
    # in flight), and every other user of the engine queues for one (DOCLLM_STORE_CONNECTIONS).
    engine = make_engine(
        settings.database_url,
        pool_size=settings.store_connections,
        connect_timeout=settings.database_connect_timeout_seconds,
        io_timeout=settings.database_timeout_seconds,
    )
    yield engine
    engine.dispose()


def _clock(client, settings: Settings):
    from docllm.adapters.redis.clock import RedisServerClock
    from docllm.adapters.redis.keys import RedisKeys

    # Re-read well within a lease: after a step of the server's clock, every process must report
    # it and renew on the new time before the fleet's quiet period (one lease) ends. On a
    # Cluster, TIME from the node that owns the queue's slot.
    lease_ms = settings.lease_seconds * 1000
    return RedisServerClock(
        client,
        resync_seconds=min(30.0, lease_ms / 3000),
        lease_ms=int(lease_ms),
        key=RedisKeys(settings.queue_prefix).ready,
    )


def _queue(client, settings: Settings, clock, metrics):
    from docllm.adapters.redis.queue import RedisTaskQueue

    queue = RedisTaskQueue(
        client,
        settings.queue_prefix,
        clock=clock,
        wait_replicas=settings.redis_wait_replicas,
        lanes=settings.lane_policy,
    )
    return metrics.counting(queue, "redis") if metrics else queue


def _grouped_acks(queue, settings: Settings):
    """The worker's queue: its acks grouped (one script call for the attempts that end together)."""
    from docllm.runtime.grouped_acks import grouped_acks

    return grouped_acks(queue, settings.store_linger_ms)


def _worker_registry(client, settings: Settings, clock):
    from docllm.adapters.redis.registry import RedisWorkerRegistry

    return RedisWorkerRegistry(client, settings.queue_prefix, clock=clock)


def _dashboard_sessions(client, settings: Settings, clock):
    """The dashboard's signing key, session generation and login throttle, in Redis (docs/DEPLOY.md, Security)."""
    from docllm.adapters.redis.dashboard_sessions import RedisDashboardSessions

    return RedisDashboardSessions(client, settings.queue_prefix, clock)


def _repository(engine, settings: Settings, metrics):
    from docllm.adapters.sql.repository import SqlAlchemyTaskRepository

    repo = SqlAlchemyTaskRepository(engine, default_max_attempts=settings.max_attempts)
    return metrics.counting(repo, "database") if metrics else repo


def _grouped_store(repository, settings: Settings):
    """The worker's store: its starts and end-of-attempt writes grouped (DOCLLM_STORE_LINGER_MS)."""
    from docllm.runtime.store_batcher import grouped

    return grouped(repository, settings.store_linger_ms)


def _metrics(settings: Settings):
    """Off (None) unless DOCLLM_METRICS_PORT is set: then the ports below are counted and timed."""
    if settings.metrics_port is None:
        return None
    from docllm.adapters.telemetry.metrics import Metrics

    return Metrics()


def _breaker(client, settings: Settings, clock):
    from docllm.adapters.redis.breaker import RedisLlmBreaker

    return RedisLlmBreaker(client, settings.queue_prefix, clock, breaker_policy(settings))


def _spend_budget(client, settings: Settings, clock):
    """The fleet's daily spend budget (I14), in Redis on the authority clock."""
    from docllm.adapters.redis.budget import RedisSpendBudget

    return RedisSpendBudget(client, settings.queue_prefix, clock, settings.spend_cap_usd_per_day)


def _spend_ledger(settings: Settings, budget):
    """The spend ledger (I16): every cap checked at one reservation, spend settled per write that
    landed, in Redis (nothing is reserved or counted for an unpriced deployment)."""
    from docllm.domain.llm.spend_ledger import SpendLedger

    hold_ms = int(2 * (settings.processing_timeout_seconds + settings.lease_seconds) * 1000)
    return SpendLedger(
        budget(),
        priced_deployments(settings) if settings.llm_provider == "openai" else [],  # offline checks cost nothing
        settings.task_max_cost_usd or None,
        settings.llm_max_chunk_chars,
        hold_ms,
    )


def priced_deployments(settings: Settings) -> list:
    """Each deployment as the ledger prices it: its own price, else DOCLLM_LLM_PRICES' for its model."""
    from docllm.domain.llm.ledger import Priced

    return [
        Priced(
            d.name,
            d.model,
            d.price if d.price is not None else settings.price_table.price(d.model),
            d.spend_cap_usd,
            d.order,
        )
        for d in settings.deployments
    ]


def _review_memory(settings: Settings, engine):
    """The review cache (issue 46) of the LLM reviewer; None when off (DOCLLM_REVIEW_CACHE) or
    for the offline checks, which cost nothing. ``engine`` is a provider: not built when off."""
    if not settings.review_cache or settings.llm_provider != "openai":
        return None
    from docllm.adapters.sql.review_cache import SqlAlchemyReviewCache
    from docllm.domain.review.cache import answerer
    from docllm.domain.review.memory import ReviewMemory

    first = min(settings.deployments, key=lambda d: d.order)  # where chunks go first (RoutedReviewer's)
    return ReviewMemory(
        SqlAlchemyReviewCache(engine()),
        answerer(first.model, first.base_url),
        settings.llm_max_chunk_chars,
        settings.review_cache_days,
    )


def _batch_store(engine):
    """The durable record of provider batches (issue 28), beside the tasks."""
    from docllm.adapters.sql.batches import SqlAlchemyBatchStore

    return SqlAlchemyBatchStore(engine)


def _marks(engine):
    """Findings a person judged (issue 46), beside the tasks."""
    from docllm.adapters.sql.marks import SqlAlchemyMarkStore

    return SqlAlchemyMarkStore(engine)


def _batch_leases(client, settings: Settings, clock, queue):
    """Who polls each batch, in Redis on the authority clock; its members' leases are ``queue``'s."""
    from docllm.adapters.redis.batch_leases import RedisBatchLeases

    return RedisBatchLeases(client, settings.queue_prefix, clock, queue)


def _batch_api(settings: Settings):
    """The Files and Batch APIs of the deployment batches go to; None: batching is off."""
    d = settings.batch_deployment
    if d is None:
        return None
    from docllm.adapters.llm.batch_client import OpenAIBatchApi

    return OpenAIBatchApi(d.base_url, d.api_key, d.model, settings.llm_timeout_seconds)


def _batch_target(settings: Settings):
    d = settings.batch_deployment
    if d is None:
        return None
    from docllm.domain.batches.members import BatchTarget
    from docllm.domain.llm.prices import batch_price

    price = d.price if d.price is not None else settings.price_table.price(d.model)
    return BatchTarget(
        deployment=d.name,
        model=d.model,
        price=batch_price(price, d.batch_prices) if price is not None else None,
        max_chunk_chars=settings.llm_max_chunk_chars,
        cap_usd=d.spend_cap_usd,
        base_url=d.base_url,
    )


def _batcher(settings: Settings, processor, store, leases, api, target, ledger):
    """The batch lane's batcher (issue 28); None when batching is off."""
    if target is None:
        return None
    from docllm.domain.batches.batcher import Batcher

    max_wait_ms, lease_ms = int(settings.batch_max_wait_seconds * 1000), int(settings.batch_lease_seconds * 1000)
    return Batcher(
        processor,
        store,
        leases,
        api,
        target,
        settings.batch_max_tasks,
        max_wait_ms,
        lease_ms,
        ledger,
        hold_ms=int(settings.batch_bound_seconds * 1000),
    )


def _batch_poller(settings: Settings, processor, store, leases, api, target, ledger, views):
    """The batch lane's poller (any worker process polls any batch); None when batching is off."""
    if target is None:
        return None
    from docllm.domain.batches.poller import BatchPoller

    return BatchPoller(
        processor,
        store,
        leases,
        api,
        target,
        poll_ms=int(settings.batch_poll_seconds * 1000),
        batch_lease_ms=int(settings.batch_lease_seconds * 1000),
        bound_ms=int(settings.batch_give_up_seconds * 1000),
        ledger=ledger,
        views=views,
        create_timeout_ms=int(settings.llm_timeout_seconds * 1000),  # the Batch API client's (_batch_api)
        monotonic=time.monotonic,
    )


def _reaper_batches(settings: Settings, store):
    """The batch record the reaper consults for an expired member lease; None: batching is off."""
    return store() if settings.batch_deployment is not None else None


def breaker_policy(settings: Settings):
    from docllm.domain.llm.breaker import BreakerPolicy

    return BreakerPolicy(
        window_seconds=settings.breaker_window_seconds,
        failure_ratio=settings.breaker_failure_ratio,
        min_calls=settings.breaker_min_calls,
        open_seconds=settings.breaker_open_seconds,
    )


def _timed_reviewer(settings: Settings, metrics, rate_gate=None, routes=None):
    from docllm.adapters.telemetry.metrics import TimedReviewer

    reviewer = _reviewer(settings, metrics, rate_gate, routes)
    return TimedReviewer(reviewer, metrics) if metrics else reviewer


def _limiter_for(client, settings: Settings, clock, deployment, named: bool = False):
    """One deployment's share of its requests and tokens per minute; None when it sets neither.
    ``named``: keyed by its name (one of several), else by its base URL and model."""
    if not (deployment.rpm or deployment.tpm):
        return None
    from docllm.adapters.redis.rate_limiter import RedisRateLimiter

    d = deployment
    name = d.name if named else None
    return RedisRateLimiter(client, settings.queue_prefix, clock, d.base_url, d.model, d.rpm, d.tpm, name=name)


def _rate_limiter(client, settings: Settings, clock):
    """The fleet's LLM rate limits of the one deployment (ARCHITECTURE.md, LLM boundary); None when
    neither DOCLLM_LLM_RPM nor _TPM is set, or with several deployments (each route has its own).
    ``client`` and ``clock`` are providers: Redis is not touched when the limits are off."""
    deployments = settings.deployments
    if settings.llm_provider != "openai" or len(deployments) > 1 or not (deployments[0].rpm or deployments[0].tpm):
        return None
    return _limiter_for(client(), settings, clock(), deployments[0])


def _rate_gate(limiter, metrics):
    if limiter is None:
        return None
    from docllm.domain.llm.rate_gate import RateGate

    return RateGate(limiter, on_wait=metrics.limit_wait.observe if metrics else None)


def _deployment_health(client, settings: Settings, clock):
    """With several deployments (DOCLLM_LLM_DEPLOYMENTS), each one's breaker and limiter in Redis,
    keyed by its name (two keys on one URL are two deployments):
    [(deployment, breaker, limiter or None)]; empty with one (the fleet's breaker is its breaker).
    ``client`` and ``clock`` are providers: Redis is not touched otherwise."""
    deployments = settings.deployments
    if settings.llm_provider != "openai" or len(deployments) < 2:
        return []
    from docllm.adapters.redis.breaker import RedisLlmBreaker
    from docllm.adapters.redis.keys import RedisKeys
    from docllm.adapters.redis.rate_limiter import breaker_key

    keys, policy = RedisKeys(settings.queue_prefix), breaker_policy(settings)
    return [
        (
            d,
            RedisLlmBreaker(client(), keys, clock(), policy, key=breaker_key(keys, d.base_url, d.model, d.name)),
            _limiter_for(client(), settings, clock(), d, named=True),
        )
        for d in deployments
    ]


def _routes(health, settings: Settings, metrics):
    """One route per deployment (ARCHITECTURE.md, Deployments): its reviewer, limits and breaker;
    None with one deployment."""
    if not health:
        return None
    from docllm.adapters.llm.routed_reviewer import Route

    return [
        Route(d, _deployment_reviewer(settings, d, metrics, _rate_gate(limiter, metrics), named=True), breaker, limiter)
        for d, breaker, limiter in health
    ]


def _deployment_reviewer(settings: Settings, d, metrics=None, rate_gate=None, named: bool = False):
    from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
    from docllm.domain.llm.prices import PriceTable

    return OpenAIReviewer(
        base_url=d.base_url,
        api_key=d.api_key,
        model=d.model,
        timeout_seconds=settings.llm_timeout_seconds,
        max_chunk_chars=settings.llm_max_chunk_chars,
        # every chunk of every attempt in flight may hold a connection
        max_connections=settings.concurrency * settings.llm_chunk_parallelism + 4,
        chunk_parallelism=settings.llm_chunk_parallelism,
        prices=PriceTable(((d.model, d.price),)) if d.price is not None else settings.price_table,
        on_call=metrics.llm_call if metrics else None,
        gate=rate_gate,
        deployment=d.name if named else None,
        spent_at=d.name,
    )


def _reviewer(settings: Settings, metrics=None, rate_gate=None, routes=None):
    if settings.llm_provider == "openai" and routes:
        from docllm.adapters.llm.routed_reviewer import RoutedReviewer

        return RoutedReviewer(
            routes,
            settings.worker_id,
            max_chunk_chars=settings.llm_max_chunk_chars,
            chunk_parallelism=settings.llm_chunk_parallelism,
            # passed over for its rate limits when its turn is further than one request may take
            max_wait=settings.llm_timeout_seconds,
        )
    if settings.llm_provider == "openai":  # the one deployment (the single-URL settings, or a list of one)
        return _deployment_reviewer(settings, settings.deployments[0], metrics, rate_gate)
    from docllm.adapters.offline.reviewer import OfflineReviewer

    if settings.offline_latency_seconds > 0:  # demos and benchmarks stand in for an LLM's latency
        from docllm.adapters.offline.slow_reviewer import SlowReviewer

        return SlowReviewer(OfflineReviewer(), settings.offline_latency_seconds)
    return OfflineReviewer()


def _rubrics(settings: Settings):
    from docllm.adapters.rubrics.catalog import YamlRubricCatalog

    return YamlRubricCatalog(settings.rubrics_dir)


def _events(settings: Settings, metrics):
    from docllm.adapters.telemetry.log_events import LoggingEvents
    from docllm.adapters.telemetry.metrics import AttemptTimer, PrometheusEvents
    from docllm.domain.events import FanoutEvents

    logs = LoggingEvents(settings.worker_id)
    # Counted, then logged: a SIGKILL between the two leaves an event counted and not logged, so
    # a counter is never below what the logs show (tests/e2e/test_processes.py checks the sum).
    return AttemptTimer(FanoutEvents(PrometheusEvents(metrics), logs) if metrics else logs)


def _tracer(settings: Settings):
    """Spans of each task's trace (docs/DEPLOY.md, Tracing); NullTracer, with nothing imported, when off."""
    from docllm.adapters.telemetry.tracing_setup import make_tracer

    return make_tracer(settings.tracing, settings.tracing_file, os.environ)


def _readiness(client, engine):
    from docllm.runtime.http_endpoints import readiness_checks

    return readiness_checks(client, engine)


class Container(containers.DeclarativeContainer):
    settings = providers.Singleton(Settings.from_env)
    metrics = providers.Singleton(_metrics, settings)

    redis_client = providers.Resource(_redis, settings)
    engine = providers.Resource(_engine, settings)

    clock = providers.Singleton(_clock, redis_client, settings)
    queue = providers.Singleton(_queue, redis_client, settings, clock, metrics)
    repository = providers.Singleton(_repository, engine, settings, metrics)
    worker_registry = providers.Singleton(_worker_registry, redis_client, settings, clock)
    dashboard_sessions = providers.Singleton(_dashboard_sessions, redis_client, settings, clock)
    rate_limiter = providers.Singleton(_rate_limiter, redis_client.provider, settings, clock.provider)
    rate_gate = providers.Singleton(_rate_gate, rate_limiter, metrics)
    deployment_health = providers.Singleton(_deployment_health, redis_client.provider, settings, clock.provider)
    routes = providers.Singleton(_routes, deployment_health, settings, metrics)  # several deployments, else None
    reviewer = providers.Singleton(_timed_reviewer, settings, metrics, rate_gate, routes)
    rubrics = providers.Singleton(_rubrics, settings)
    breaker = providers.Singleton(_breaker, redis_client, settings, clock)  # the fleet's, in Redis
    spend_budget = providers.Singleton(_spend_budget, redis_client, settings, clock)  # the fleet's, in Redis
    spend_ledger = providers.Singleton(_spend_ledger, settings, spend_budget.provider)  # every cap, one place (I16)
    batch_store = providers.Singleton(_batch_store, engine)  # the batch lane's (issue 28)
    review_memory = providers.Singleton(_review_memory, settings, engine.provider)  # None: off (issue 46)
    batch_leases = providers.Singleton(_batch_leases, redis_client, settings, clock, queue)
    marks = providers.Singleton(_marks, engine)  # findings a person judged (issue 46)
    batch_api = providers.Singleton(_batch_api, settings)  # None: batching is off
    batch_target = providers.Singleton(_batch_target, settings)
    events = providers.Singleton(_events, settings, metrics)
    tracer = providers.Singleton(_tracer, settings)
    readiness = providers.Singleton(_readiness, redis_client, engine)

    retry_policy = providers.Singleton(
        RetryPolicy,
        max_attempts=settings.provided.max_attempts,
        max_handbacks=settings.provided.max_handbacks,
        base_seconds=settings.provided.retry_base_seconds,
        cap_seconds=settings.provided.retry_max_seconds,
    )
    lease_policy = providers.Singleton(
        LeasePolicy,
        lease_seconds=settings.provided.lease_seconds,
        max_runtime_seconds=settings.provided.processing_timeout_seconds,
        reaper_interval_seconds=settings.provided.reaper_interval_seconds,
    )
    limits = providers.Singleton(
        Limits,
        max_payload_bytes=settings.provided.max_payload_bytes,
        max_document_bytes=settings.provided.max_document_bytes,
    )

    grouped_store = providers.Factory(_grouped_store, repository, settings)
    grouped_queue = providers.Factory(_grouped_acks, queue, settings)
    processor = providers.Factory(
        TaskProcessor,
        grouped_queue,
        grouped_store,
        reviewer,
        clock,
        retry_policy,
        lease_policy,
        worker_id=settings.provided.worker_id,
        limits=limits,
        events=events,
        rubrics=rubrics,
        tracer=tracer,
        ledger=spend_ledger,
        cache=review_memory,
    )
    reaper = providers.Factory(
        Reaper,
        queue,
        repository,
        retry_policy,
        max_payload_bytes=settings.provided.max_payload_bytes,
        lease_ms=lease_policy.provided.lease_ms,
        events=events,
        worker_id=settings.provided.worker_id,
        tracer=tracer,
        batches=providers.Callable(_reaper_batches, settings, batch_store.provider),
        ledger=spend_ledger,
    )
    # The batch lane (issue 28): run by ``docllm worker`` when some deployment offers batches.
    batcher = providers.Factory(
        _batcher, settings, processor, batch_store, batch_leases, batch_api, batch_target, spend_ledger
    )
    batch_poller = providers.Factory(
        _batch_poller,
        settings,
        processor,
        batch_store,
        batch_leases,
        batch_api,
        batch_target,
        spend_ledger,
        repository,
    )
    reconcile_grace_ms = providers.Callable(
        lambda seconds: int(seconds * 1000), settings.provided.reconcile_grace_seconds
    )
    # What the original deployment's workers left in Redis, swept at the reconciler's rate
    # (ARCHITECTURE.md, Switching over).
    leftover_sweep = providers.Factory(
        LeftoverSweep, queue, repository, clock, grace_ms=reconcile_grace_ms, events=events
    )
    reconciler = providers.Factory(
        Reconciler,
        queue,
        repository,
        clock,
        grace_ms=reconcile_grace_ms,
        events=events,
        leftovers=leftover_sweep,
        # One reconciler for the fleet: the lease outlives a few of its cycles, so the process
        # that holds it keeps it (and its lap of the structures) while it lives.
        lead_ms=providers.Callable(lambda seconds: int(seconds * 3000), settings.provided.reconcile_interval_seconds),
        worker_id=settings.provided.worker_id,
        tracer=tracer,
    )
