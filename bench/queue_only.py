"""2. Queue only: ``RedisTaskQueue.claim`` + ``ack`` per second, at concurrency 1, 4 and 16.

Threads in one process share one ``RedisTaskQueue`` (one client, its connection pool: one
connection per thread in use), as the worker's slots do. No database, no reviewer.
"""

from __future__ import annotations

import threading
import time

from bench.common import Env, Table, cpu_seconds, verdict
from bench.floor import fill

PREFIX = "qonly"


def claim_ack_rate(env: Env, concurrency: int, n: int) -> tuple[float, float | None]:
    """claim+ack per second, and the redis-server's CPU microseconds per claim+ack."""
    from docllm.adapters.redis.client import make_redis_client
    from docllm.adapters.redis.queue import RedisTaskQueue

    client = make_redis_client(env.redis_url(6), "")
    queue = RedisTaskQueue(client, PREFIX)
    client.flushdb()
    fill(client, n, queue.keys.ready)
    queue.now_ms()  # the clock's first TIME read, outside the timing
    lease_ms = 30_000
    done = [0] * concurrency
    start = threading.Barrier(concurrency + 1)

    def slot(i: int) -> None:
        start.wait()
        while True:
            delivery = queue.claim(f"bench:{i}", lease_ms)
            if delivery is None:
                return
            queue.ack(delivery.token)
            done[i] += 1

    threads = [threading.Thread(target=slot, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    cpu0 = cpu_seconds(env.redis.pid)
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    cpu1 = cpu_seconds(env.redis.pid)
    assert sum(done) == n, (sum(done), n)
    assert queue.stats().processing == 0
    client.flushdb()
    client.close()
    return n / elapsed, (None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) * 1e6 / n)


def run(env: Env, results: dict) -> list[Table]:
    n = 300 if env.quick else 6000
    floor = results.get("floor", {}).get("two_scripts")
    measured = {c: claim_ack_rate(env, c, n) for c in (1, 4, 16)}
    results["queue_only"] = {c: {"per_s": r, "server_us": us} for c, (r, us) in measured.items()}
    table = Table(
        "queue_only",
        "2. Queue only: RedisTaskQueue claim+ack (threads sharing one client)",
        ["concurrency", "claim+ack/s", "vs 2-script floor", "redis-server CPU us/task", "goal", "met"],
    )
    for c, (rate, server_us) in measured.items():
        ratio = rate / floor if floor else None
        if c == 1:
            goal, ok = ">= 0.90 x floor", (ratio >= 0.90 if ratio else None)
        else:
            goal, ok = "> 1.00 x floor", (ratio > 1.0 if ratio else None)
        table.add(c, rate, None if ratio is None else f"{ratio:.2f} x", server_us, goal, verdict(ok))
    table.note(f"N = {n} tasks per row; the floor is measured in the same run (table 1).")
    return [table]
