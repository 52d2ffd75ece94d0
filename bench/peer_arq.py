"""arq side of the LLM-bound runs: ``python -m bench.peer_arq`` is one arq worker (one process, one
event loop) with ``max_jobs`` = ``BENCH_ARQ_MAX_JOBS``, on ``BENCH_ARQ_URL``; its one function makes
the LLM call with ``openai.AsyncOpenAI`` (``bench.llm_task``). ``enqueue(url, n)`` queues n jobs.

arq 0.28 pins ``redis<6``; it runs here on the redis-py docllm uses (installed with
``pip install --no-deps arq``, so the bench extra does not list it: pip could not resolve it with
Celery's ``redis>=6.4``)."""

from __future__ import annotations

import asyncio
import os

from arq.connections import RedisSettings, create_pool

from bench.llm_task import review_async

QUEUE = "arq:queue"  # arq's default queue
MAX_JOBS = int(os.environ.get("BENCH_ARQ_MAX_JOBS", "10"))


def redis_settings(url: str) -> RedisSettings:
    """arq's settings with a connection pool that a job per slot cannot exhaust: redis-py 8's
    asyncio pool defaults to 100 connections, where the redis<6 that arq pins had no limit."""
    settings = RedisSettings.from_dsn(url)
    settings.max_connections = 2 * MAX_JOBS + 100
    return settings


async def llm(ctx: dict, task_id: int) -> int:
    return await review_async(task_id)


class WorkerSettings:
    functions = [llm]
    redis_settings = redis_settings(os.environ.get("BENCH_ARQ_URL", "redis://127.0.0.1:6379/4"))
    max_jobs = MAX_JOBS
    job_timeout = 300
    max_tries = 1


def enqueue(url: str, n: int) -> None:
    async def go() -> None:
        pool = await create_pool(RedisSettings.from_dsn(url))
        try:
            for start in range(0, n, 50):  # 50 at a time: within the pool's 100 connections
                await asyncio.gather(*(pool.enqueue_job("llm", i) for i in range(start, min(n, start + 50))))
        finally:
            await pool.aclose()

    asyncio.run(go())


def main() -> int:
    from arq.worker import run_worker

    run_worker(WorkerSettings)  # handles SIGTERM and SIGINT itself
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
