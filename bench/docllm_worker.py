"""``python -m bench.docllm_worker``: the docllm worker process with a no-op reviewer.

It is ``docllm.entrypoints.worker.main`` (settings from the environment, the container, the
``Service`` with worker slots, reaper and reconciler) with two container overrides:

- ``reviewer``: :class:`NoopReviewer` (``BENCH_REVIEWER=offline`` keeps the offline reviewer);
  on its first call in the process it stamps ``BENCH_MARK_KEY`` in Redis (one ``SET NX``), the
  start of the measured window, as the peers' no-op jobs do;
- ``queue``: when ``BENCH_LATENCY_FILE`` is set, :class:`TimedQueue` notes the time from before
  each ``claim_batch`` or ``lease_staged`` to after its ``ack`` and writes the list (seconds) there at exit.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from dependency_injector import providers

from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.entrypoints.bootstrap import build_container, build_service, load_settings, prepare_schema


class NoopReviewer:
    name = "noop"
    model = "noop"

    def __init__(self, mark_url: str | None, mark_key: str):
        self._mark_url, self._mark_key, self._marked = mark_url, mark_key, False
        self._lock = threading.Lock()

    async def check(self) -> None:
        pass

    async def review(self, task_name: str, document: str) -> dict[str, Any]:
        if not self._marked and self._mark_url:
            with self._lock:
                if not self._marked:
                    self._marked = True
                    mark_first_start(self._mark_url, self._mark_key)
        return {}


def mark_first_start(url: str, key: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.set(key, repr(time.time()), nx=True)


class TimedQueue(RedisTaskQueue):
    """``RedisTaskQueue`` that keeps claim-to-ack times (perf_counter, in this process)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.claimed: dict[str, float] = {}
        self.latencies: list[float] = []

    def claim_batch(self, worker_id: str, lease_ms: int, limit: int):
        t = time.perf_counter()
        deliveries = super().claim_batch(worker_id, lease_ms, limit)
        for delivery in deliveries:
            self.claimed[delivery.token] = t
        return deliveries

    def lease_staged(self, raw: str, worker_id: str, lease_ms: int):
        t = time.perf_counter()
        delivery = super().lease_staged(raw, worker_id, lease_ms)
        if delivery is not None:
            self.claimed[delivery.token] = t
        return delivery

    def ack(self, token: str) -> bool:
        ok = super().ack(token)
        t = self.claimed.pop(token, None)
        if t is not None:
            self.latencies.append(time.perf_counter() - t)
        return ok


def main() -> int:
    settings = load_settings()
    container = build_container(settings)
    mark_url = os.environ.get("BENCH_MARK_URL")
    mark_key = os.environ.get("BENCH_MARK_KEY", "bench:first_start")
    if os.environ.get("BENCH_REVIEWER", "noop") == "noop":
        container.reviewer.override(providers.Object(NoopReviewer(mark_url, mark_key)))
    latency_file = os.environ.get("BENCH_LATENCY_FILE")
    if latency_file:
        container.queue.override(
            providers.Singleton(
                lambda client, s, clock: TimedQueue(client, s.queue_prefix, clock=clock),
                container.redis_client,
                container.settings,
                container.clock,
            )
        )
    prepare_schema(container)
    build_service(container).run_forever()
    if latency_file:
        with open(latency_file, "w") as out:
            json.dump(container.queue().latencies, out)
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
