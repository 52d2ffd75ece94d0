"""RQ side of the peer runs: the jobs, and ``python -m bench.peer_rq URL fork|simple`` (one worker).

Settings for the recovery run come from the environment: ``BENCH_RQ_MONITOR`` (the
``job_monitoring_interval``), ``BENCH_RQ_MAINTENANCE`` (``maintenance_interval``) and
``BENCH_RQ_TTL`` (``worker_ttl``; the idle dequeue wakes every ttl - 15 s).
"""

from __future__ import annotations

import os
import sys
import time

from bench.peer_marks import mark_first_start, record_start

QUEUE = "bench"


def noop() -> None:
    mark_first_start()


def slow(key: str, seconds: float) -> None:
    record_start(key)
    time.sleep(seconds)


def main() -> int:
    import logging

    from redis import Redis
    from rq import Queue, SimpleWorker, Worker

    url, kind = sys.argv[1], sys.argv[2]
    conn = Redis.from_url(url)
    cls = SimpleWorker if kind == "simple" else Worker
    options = {}
    for env, name in (
        ("BENCH_RQ_MONITOR", "job_monitoring_interval"),
        ("BENCH_RQ_MAINTENANCE", "maintenance_interval"),
        ("BENCH_RQ_TTL", "worker_ttl"),
    ):
        if os.environ.get(env):
            options[name] = int(os.environ[env])
    logging.basicConfig(level=logging.WARNING)
    worker = cls([Queue(QUEUE, connection=conn)], connection=conn, **options)
    worker.work(logging_level="WARNING", with_scheduler=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
