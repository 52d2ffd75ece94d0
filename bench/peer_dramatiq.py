"""Dramatiq side of the peer runs: a Redis broker, the actors, and ``python -m bench.peer_dramatiq``
(one worker process, ``BENCH_DRAMATIQ_THREADS`` threads, default 8 as Dramatiq's CLI). The prefetch
is Dramatiq's own ``dramatiq_queue_prefetch`` variable (unset: threads x 2)."""

from __future__ import annotations

import os
import signal
import threading
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.llm_task import review
from bench.peer_marks import mark_first_start, record_start
from bench.peer_store import reviewed_and_stored

QUEUE = "bench"
broker = RedisBroker(url=os.environ.get("BENCH_DRAMATIQ_URL", "redis://127.0.0.1:6379/2"))
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def noop() -> None:
    mark_first_start()


@dramatiq.actor(queue_name=QUEUE, max_retries=3, time_limit=3_600_000)
def slow(key: str, seconds: float) -> None:
    record_start(key)
    time.sleep(seconds)


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def llm(task_id: int) -> None:
    review(task_id)


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def llm_stored(task_id: int) -> None:
    """The equal-durability form: docllm's two MariaDB writes around the same call."""
    reviewed_and_stored(task_id, review)


def main() -> int:
    import logging

    logging.basicConfig(level=logging.WARNING)
    worker = dramatiq.Worker(broker, worker_threads=int(os.environ.get("BENCH_DRAMATIQ_THREADS", "8")))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    worker.start()
    done.wait()
    worker.stop(timeout=5000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
