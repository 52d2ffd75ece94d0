"""5. Reaper cost against leases in flight: 1,000, 10,000 and 100,000, with 0 and 100 expired.

The leases are made by the product's own ``claim.lua`` (pipelined, so that 100,000 take seconds);
the expired ones are claimed with a ``now`` two minutes back. One cycle is ``Reaper.reap_once()``
(promote due retries, read expired leases, settle each) with an in-memory repository, so the
figures are the Redis side alone; commands are counted by the server (``INFO commandstats``,
commands run inside scripts included) and round trips by the client.

Beside it, on the same data, the original note's cycle: ``LRANGE processing 0 -1`` then one
``HGET processing_ts`` per item, and for an expired one ``LREM`` + ``HDEL`` + ``LPUSH`` (its
database reclaim is left out, as the in-memory repository leaves ours out).
"""

from __future__ import annotations

import json
import time
import uuid

from bench.common import Env, Table, payload, verdict
from docllm.domain.lanes.model import LanePolicy

PREFIX = "reap"
DB = 7
SIZES = (1_000, 10_000, 100_000)
EXPIRED = 100
ORIGINAL_TIMEOUT_S = 60


class CountingClient:
    """Counts the client's round trips (pipelines count once)."""

    def __init__(self, client):
        self.client, self.calls = client, 0
        original = client.execute_command

        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        client.execute_command = counted


def server_commands(client) -> int:
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_config"))


def fill(client, scripts, keys, now_ms: int, live: int, expired: int, first_id: int) -> list[tuple[int, str]]:
    """``live`` leases due in an hour and ``expired`` ones due two minutes ago; returns the expired
    (task_id, token) pairs."""
    batch = 2000
    expired_pairs = []
    ids = list(range(first_id, first_id + expired + live))  # the expired ones first
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        client.lpush(keys.ready, *(payload(i) for i in chunk))
        pipe = client.pipeline(transaction=False)
        for i in chunk:
            token = uuid.uuid4().hex
            stale = i < first_id + expired
            now = now_ms - 120_000 if stale else now_ms
            lease = 60_000 if stale else 3_600_000
            args = [now, lease, "bench", 100, LanePolicy().script_arg(), token]
            scripts["claim"](keys=keys.script_keys, args=args, client=pipe)
            if stale:
                expired_pairs.append((i, token))
        pipe.execute()
    return expired_pairs


def original_cycle(client, keys, now_s: int) -> int:
    """The note's reaper loop, once; returns how many it reclaimed."""
    reclaimed = 0
    items = client.lrange(keys.processing, 0, -1)
    for raw in items:
        data = json.loads(raw)
        task_id, task_name = data.get("task_id"), data.get("task_name")
        start_ts_raw = client.hget(keys.processing_ts, task_id)
        if start_ts_raw is None:
            continue
        if int(start_ts_raw) > now_s - ORIGINAL_TIMEOUT_S:
            continue
        # task_service.reclaim_task(...) would run here (left out: Redis side only)
        client.lrem(keys.processing, 1, raw)
        client.hdel(keys.processing_ts, task_id)
        client.lpush(keys.ready, json.dumps({"task_id": task_id, "task_name": task_name}, ensure_ascii=False))
        reclaimed += 1
    return reclaimed


def measure_size(env: Env, size: int) -> list[dict]:
    from docllm.adapters.redis.clock import RedisServerClock
    from docllm.adapters.redis.queue import RedisTaskQueue, queue_scripts
    from docllm.domain.tasks.policies import RetryPolicy
    from docllm.domain.tasks.reaper import Reaper
    from tests.support.memory.repository import InMemoryTaskRepository

    client = env.client(DB)
    client.flushdb()
    counter = CountingClient(client)
    # A reaper measured in its steady state: a clock that has read the server for half a lease
    # (before that its verdicts wait, RedisServerClock.verdict_ms). A short lease keeps that wait
    # short; the leases filled below carry their own lengths.
    clock = RedisServerClock(client, lease_ms=1_000)
    while clock.verdict_ms() is None:
        time.sleep(0.05)
    queue = RedisTaskQueue(client, PREFIX, clock=clock)
    keys, scripts = queue.keys, queue_scripts(client)
    now_ms = queue.now_ms()
    rows = []

    def prepare(expired: int) -> None:
        client.flushdb()
        repo = InMemoryTaskRepository()
        pairs = fill(client, scripts, keys, now_ms, size, expired, first_id=1)
        for task_id, token in pairs:
            # rows for the expired ones only: the reaper never reads the others
            assert repo.create("bench", "bench").task_id == task_id
            repo.start_attempt(task_id, token)
        prepare.repo = repo  # type: ignore[attr-defined]

    for expired in (0, EXPIRED):
        prepare(expired)
        reaper = Reaper(queue, prepare.repo, RetryPolicy(), batch=EXPIRED)  # type: ignore[attr-defined]
        repeats = 5 if expired == 0 else 1
        times, cmds, trips = [], [], []
        for _ in range(repeats):
            client.config_resetstat()
            before = counter.calls
            t = time.perf_counter()
            settled = reaper.reap_once()
            times.append(time.perf_counter() - t)
            trips.append(counter.calls - before)
            cmds.append(server_commands(client))
            assert settled == expired, (settled, expired)
        ours = {"ms": sorted(times)[len(times) // 2] * 1000, "commands": cmds[-1], "round_trips": trips[-1]}

        prepare(expired)
        client.config_resetstat()
        before = counter.calls
        t = time.perf_counter()
        reclaimed = original_cycle(client, keys, now_ms // 1000)
        elapsed = time.perf_counter() - t
        assert reclaimed == expired, (reclaimed, expired)
        original = {"ms": elapsed * 1000, "commands": server_commands(client), "round_trips": counter.calls - before}
        rows.append({"in_flight": size + expired, "expired": expired, "docllm": ours, "original": original})
    client.flushdb()
    client.close()
    return rows


def run(env: Env, results: dict) -> list[Table]:
    sizes = (1_000, 10_000) if env.quick else SIZES
    if env.quick:
        env.skip("reaper cost at 100,000 in flight: --quick")
    rows = [row for size in sizes for row in measure_size(env, size)]
    results["reaper"] = rows
    table = Table(
        "reaper",
        "5. Reaper cost per cycle against leases in flight (Redis side)",
        [
            "in flight",
            "expired",
            "docllm ms",
            "docllm commands",
            "docllm round trips",
            "original ms",
            "original commands",
            "original round trips",
        ],
    )
    for r in rows:
        d, o = r["docllm"], r["original"]
        table.add(
            r["in_flight"],
            r["expired"],
            d["ms"],
            d["commands"],
            d["round_trips"],
            o["ms"],
            o["commands"],
            o["round_trips"],
        )
    flat = _flat(rows)
    table.note(
        f"Goal: flat in the number in flight: {verdict(flat)} (docllm's commands and round trips per "
        "cycle, at equal expired, within 10% from the smallest to the largest number in flight)."
    )
    table.note(
        "docllm with 0 expired: median of 5 cycles; with 100 expired: one cycle (it settles them). "
        "Commands include those run inside scripts."
    )
    return [table]


def _flat(rows: list[dict], slack: float = 1.10) -> bool:
    """Commands and round trips per cycle within 10% across sizes (a clock re-read, one TIME, may
    land in any cycle)."""
    by_expired: dict[int, list] = {}
    for r in rows:
        by_expired.setdefault(r["expired"], []).append(r["docllm"])
    return all(
        max(d[k] for d in ds) <= slack * min(d[k] for d in ds) + 1
        for ds in by_expired.values()
        for k in ("commands", "round_trips")
    )
