"""1. The floor: tight redis-py loops on one connection, no docllm code.

- round trips/s: ``PING`` in a loop;
- the fewest commands a reliable claim+ack needs: ``LMOVE ready processing`` then
  ``LREM processing``: 2 round trips per task; and the same pipelined (a batch of claims in one
  round trip, then a batch of acks);
- the original note's loop: ``BRPOPLPUSH``, ``HSET processing_ts``, ``LREM``, ``HDEL``: 4 round trips;
- a 2-script loop: one minimal claim script (move + lease index) and one ack script: the least a
  leased, atomic claim+ack costs in round trips, which is what ``RedisTaskQueue`` does.
"""

from __future__ import annotations

import time

from bench.common import Env, Table, cpu_seconds, payload

CLAIM_LUA = """
local raw = redis.call('RPOP', KEYS[1])
if not raw then return false end
redis.call('LPUSH', KEYS[2], raw)
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[2])
return raw
"""
ACK_LUA = """
redis.call('LREM', KEYS[2], -1, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
"""
READY, PROCESSING, LEASES, TS = "floor:ready", "floor:processing", "floor:leases", "floor:ts"
BATCH = 100


def fill(client, n: int, key: str = READY) -> None:
    client.delete(READY, PROCESSING, LEASES, TS)
    for start in range(0, n, 1000):
        client.lpush(key, *(payload(i + 1) for i in range(start, min(n, start + 1000))))


def loop_ping(client, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        client.ping()
    return n / (time.perf_counter() - t)


def loop_two_commands(client, n: int) -> float:
    fill(client, n)
    t = time.perf_counter()
    done = 0
    while True:
        raw = client.lmove(READY, PROCESSING, "RIGHT", "LEFT")
        if raw is None:
            break
        client.lrem(PROCESSING, -1, raw)
        done += 1
    assert done == n
    return done / (time.perf_counter() - t)


def loop_two_commands_pipelined(client, n: int) -> float:
    fill(client, n)
    t = time.perf_counter()
    done = 0
    while True:
        pipe = client.pipeline(transaction=False)
        for _ in range(BATCH):
            pipe.lmove(READY, PROCESSING, "RIGHT", "LEFT")
        got = [raw for raw in pipe.execute() if raw is not None]
        if not got:
            break
        pipe = client.pipeline(transaction=False)
        for raw in got:
            pipe.lrem(PROCESSING, -1, raw)
        pipe.execute()
        done += len(got)
    assert done == n
    return done / (time.perf_counter() - t)


def loop_original(client, n: int) -> float:
    """The original note's worker loop, minus ``process_task`` (4 round trips per task)."""
    fill(client, n)
    t = time.perf_counter()
    done = 0
    while done < n:
        raw = client.brpoplpush(READY, PROCESSING, timeout=10)
        task_id = raw[raw.index(b":") + 1 : raw.index(b",")].strip()  # json.loads stand-in, cheap
        client.hset(TS, task_id, int(time.time()))
        client.lrem(PROCESSING, 1, raw)
        client.hdel(TS, task_id)
        done += 1
    return done / (time.perf_counter() - t)


def loop_two_scripts(client, n: int) -> float:
    claim, ack = client.register_script(CLAIM_LUA), client.register_script(ACK_LUA)
    keys = [READY, PROCESSING, LEASES]
    fill(client, n)
    t = time.perf_counter()
    done = 0
    while True:
        token = str(done)
        raw = claim(keys=keys, args=[int(time.time() * 1000) + 30000, token])
        if raw is None:
            break
        ack(keys=keys, args=[raw, token])
        done += 1
    assert done == n
    return done / (time.perf_counter() - t)


def loop_two_scripts_pipelined(client, n: int) -> float:
    claim, ack = client.register_script(CLAIM_LUA), client.register_script(ACK_LUA)
    keys = [READY, PROCESSING, LEASES]
    fill(client, n)
    t = time.perf_counter()
    done = 0
    while True:
        pipe = client.pipeline(transaction=False)
        tokens = [str(done + i) for i in range(BATCH)]
        for token in tokens:
            claim(keys=keys, args=[int(time.time() * 1000) + 30000, token], client=pipe)
        got = [(raw, tok) for raw, tok in zip(pipe.execute(), tokens, strict=True) if raw is not None]
        if not got:
            break
        pipe = client.pipeline(transaction=False)
        for raw, token in got:
            ack(keys=keys, args=[raw, token], client=pipe)
        pipe.execute()
        done += len(got)
    assert done == n
    return done / (time.perf_counter() - t)


LOOPS = {
    "round_trips": loop_ping,
    "two_commands": loop_two_commands,
    "two_commands_pipelined": loop_two_commands_pipelined,
    "original_four": loop_original,
    "two_scripts": loop_two_scripts,
    "two_scripts_pipelined": loop_two_scripts_pipelined,
}


def measure(env: Env) -> dict[str, float]:
    """Every loop once, on db 5; figures in operations per second, and the redis-server's CPU
    microseconds per operation under ``<name>_server_us``."""
    n = 300 if env.quick else 6000
    client = env.client(db=5)
    out: dict[str, float] = {}
    try:
        client.flushdb()
        loop_ping(client, min(n, 500))  # warm the connection and the server
        for name, loop in LOOPS.items():
            before = cpu_seconds(env.redis.pid)
            out[name] = loop(client, n)
            after = cpu_seconds(env.redis.pid)
            if before is not None and after is not None:
                out[f"{name}_server_us"] = (after - before) * 1e6 / n
        return out
    finally:
        client.flushdb()
        client.close()


def run(env: Env, results: dict) -> list[Table]:
    f = measure(env)
    results["floor"] = f
    table = Table(
        "floor",
        "1. Floor: redis-py loops on one connection (no docllm code)",
        ["loop", "round trips per task", "ops/s", "tasks/s", "redis-server CPU us/op", "reference"],
    )
    us = lambda k: f.get(f"{k}_server_us")  # noqa: E731
    table.add("PING (one round trip)", 1, f["round_trips"], None, us("round_trips"), "~8,800 round trips/s")
    table.add("LMOVE + LREM (fewest commands)", 2, None, f["two_commands"], us("two_commands"), "-")
    table.add(
        f"LMOVE + LREM, pipelined {BATCH} at a time",
        2 / BATCH,
        None,
        f["two_commands_pipelined"],
        us("two_commands_pipelined"),
        "-",
    )
    table.add(
        "original note: BRPOPLPUSH, HSET, LREM, HDEL",
        4,
        None,
        f["original_four"],
        us("original_four"),
        "~2,000 tasks/s",
    )
    table.add("2 scripts: claim (move + lease), ack", 2, None, f["two_scripts"], us("two_scripts"), "~3,600 tasks/s")
    table.add(
        f"2 scripts, pipelined {BATCH} at a time",
        2 / BATCH,
        None,
        f["two_scripts_pipelined"],
        us("two_scripts_pipelined"),
        "-",
    )
    table.note("redis-server CPU: utime+stime of the server process over the loop, per task (per PING).")
    table.note(
        "Each loop runs the same N tasks from a pre-filled list on one connection; "
        "'2 scripts' is the floor that goal 2 is measured against."
    )
    return [table]
