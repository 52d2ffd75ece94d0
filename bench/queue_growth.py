"""8. Costs that grew with the queue (issue 13, item 8), before and after, on a real redis-server.

    PYTHONPATH=src:. python -m bench.queue_growth            # 1k, 10k, 100k, 200k
    PYTHONPATH=src:. python -m bench.queue_growth --quick    # 1k, 10k

- Reconciler cycle against payloads in ready: before, every cycle of every worker process read
  every structure (``referenced_task_ids``, still there for operators); now a cycle reads one
  page (``Reconciler.reconcile_once`` with its default ``scan_page`` of 10,000) and one process
  of the fleet does it. Rows come from an in-memory repository (1,000 per batch), so the figures
  are the Redis side and the parsing.
- ``dead retry --all`` against dead letters: before, one ``remove_dead`` scan of the whole list per
  task (measured on a sample of 20 tasks and multiplied out: the whole run would take hours); now
  one pass for all of them (``retry_dead``, measured whole).
- Two reapers reading a backlog of 1,000 expired leases: before, both took the same oldest 100;
  now each starts at a random point of the backlog.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time

from bench.common import Table
from docllm.adapters.redis.queue import RedisTaskQueue
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.producer import retry_dead
from docllm.domain.tasks.reconciler import Reconciler
from sim.manual_clock import ManualClock
from tests.servers import RedisServer
from tests.support.memory.repository import InMemoryTaskRepository


def _fill_ready(client, queue: RedisTaskQueue, n: int) -> None:
    for start in range(1, n + 1, 5_000):
        client.lpush(queue.keys.ready, *(make_payload(i, "doc.md") for i in range(start, min(n, start + 4_999) + 1)))


def _timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best * 1000


class Timed:
    """A queue whose chosen methods are timed (ms per call)."""

    def __init__(self, inner, *names: str):
        self.inner, self.ms = inner, {name: [] for name in names}

    def __getattr__(self, attr):
        found = getattr(self.inner, attr)
        if attr not in self.ms:
            return found

        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return found(*args, **kwargs)
            finally:
                self.ms[attr].append((time.perf_counter() - began) * 1000)

        return timed


def reconciler(client, sizes) -> Table:
    table = Table(
        "queue_growth_reconciler",
        "8a. Reconciler: Redis structures read per cycle, against payloads in ready (ms)",
        [
            "payloads",
            "before: every structure",
            "after: mean cycle",
            "after: slowest cycle",
            "payloads read per cycle, at most",
        ],
    )
    for n in sizes:
        client.flushall()
        clock = ManualClock()
        queue = Timed(RedisTaskQueue(client, f"g{n}", clock=clock), "referenced_page")
        _fill_ready(client, queue.inner, n)
        repo = InMemoryTaskRepository(clock)
        for _ in range(min(n, 1_000)):
            repo.create("doc.md", "x")
        before = _timed(queue.inner.referenced_task_ids)
        rec = Reconciler(queue, repo, clock, grace_ms=300_000)
        for _ in range(max(3, n // rec.scan_page + 2)):  # a whole lap of the structures, and more
            rec.reconcile_once()
        cycles = queue.ms["referenced_page"]
        table.add(
            f"{n:,}",
            round(before, 1),
            round(sum(cycles) / len(cycles), 1),
            round(max(cycles), 1),
            f"{min(n, rec.scan_page):,}",
        )
    table.note("before: per worker process per cycle; after: per fleet per cycle (the reconciler's lease)")
    table.note("the batch of 1,000 rows each cycle also reads is the same before and after, and left out")
    return table


def dead_retry(client, sizes) -> Table:
    table = Table(
        "queue_growth_dead_retry",
        "8b. docllm dead retry --all against dead letters (ms)",
        ["dead letters", "before: one scan per task (x N)", "after: the one removal", "after: retry_dead, whole"],
    )
    for n in sizes:
        client.flushall()
        clock = ManualClock()
        queue = RedisTaskQueue(client, f"d{n}", clock=clock)
        repo = InMemoryTaskRepository(clock)
        for _ in range(n):
            task = repo.create("doc.md", "x", max_attempts=1)
            repo.start_attempt(task.task_id, "t")
            repo.fail(task.task_id, 1, "bad")
        with client.pipeline(transaction=False) as pipe:
            for i in range(1, n + 1):
                queue._scripts["dead_letter"](
                    keys=queue.keys.script_keys, args=["", make_payload(i, "doc.md"), "bad", 0, i, ""], client=pipe
                )
            pipe.execute()
        sample = random.Random(0).sample(range(1, n + 1), 20)
        began = time.perf_counter()
        for tid in sample:  # the old per-task call; these letters are gone for the run below
            queue.remove_dead_letters([tid])
        per_task = (time.perf_counter() - began) / len(sample)
        timed = Timed(queue, "remove_dead_letters")
        began = time.perf_counter()
        requeued = retry_dead(repo, timed, None)
        whole = (time.perf_counter() - began) * 1000
        assert len(requeued) == n - len(sample) and queue.stats().dead == 0
        [removal] = timed.ms["remove_dead_letters"]
        table.add(f"{n:,}", f"{per_task * n * 1000:,.0f}", round(removal, 1), round(whole, 1))
    table.note("before: the time of 20 single-task removals, scaled to N tasks")
    table.note("after, whole: mostly the in-memory repository's reopen (it deep-copies rows) and one LPUSH per task")
    return table


def reapers(client) -> Table:
    table = Table(
        "queue_growth_reapers", "8c. Two reapers, 1,000 expired leases, batch 100", ["start", "leases both took"]
    )
    client.flushall()
    clock = ManualClock()
    queue = RedisTaskQueue(client, "r", clock=clock)
    _fill_ready(client, queue, 1_000)
    for _ in range(1_000):
        queue.claim("crashed", 1_000)
    clock.advance(2_000)
    oldest = [{d.token for d in queue.expired(100)} for _ in range(2)]
    rngs = [random.Random(1), random.Random(2)]
    spread = [{d.token for d in queue.expired(100, start=rng.random())} for rng in rngs]
    table.add("before: oldest first", len(oldest[0] & oldest[1]))
    table.add("after: a random point of the backlog (two seeds)", len(spread[0] & spread[1]))
    return table


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000, 200_000)
    with RedisServer(tempfile.mkdtemp(prefix="docllm-bench-")) as server:
        server.start()
        client = server.client()
        client.config_set("appendonly", "no")  # the fill is not what is measured
        tables = [reconciler(client, sizes), dead_retry(client, sizes[:3]), reapers(client)]
    for table in tables:
        print(table.text(), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
