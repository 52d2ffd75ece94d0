"""The TaskQueue port over Redis (ARCHITECTURE.md, Redis layout, Operations, Clocks).

Every change that touches more than one key is one Lua script from ``adapters/redis/lua/`` (atomic:
a crash leaves it done or not done), run with the authority's ``now_ms`` from the clock. The
client should not decode responses: payloads are kept byte for byte, and bytes that are not
UTF-8 travel through ``str`` as surrogate escapes.
"""

from __future__ import annotations

import functools
import heapq
import json
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from importlib import resources
from typing import Any, cast

from redis.commands.core import Script

from docllm.adapters.redis.client import RedisClient
from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.topology import node_for, recover
from docllm.domain.model import DeadLetter, Delivery, Leftovers, QueueStats
from docllm.domain.payload import task_id_of
from docllm.domain.ports import Clock

SCRIPT_NAMES = (
    "claim",
    "clock_step",
    "lease_staged",
    "unstage",
    "clamp",
    "extend_many",
    "ack",
    "retry_later",
    "requeue",
    "dead_letter",
    "expired",
    "promote",
    "remove_dead",
    "stats",
    "leftovers",
    "release_leftovers",
    "lead",
)

# Processes read the authority clock at slightly different moments: a deadline this much past the
# horizon is still legitimate (clamp).
CLAMP_SLACK_MS = 1_000

# DOCLLM_REDIS_WAIT_REPLICAS: these scripts (a lease taken, a lease ended) wait for replicas.
WAITED_SCRIPTS = frozenset({"claim", "lease_staged", "ack"})
WAIT_TIMEOUT_MS = 1_000

# A blocked BLMOVE answers when its own timeout ends; the socket may wait this much longer.
BLOCK_READ_MARGIN_S = 5.0


def with_lib(body: str) -> str:
    """A queue script's source: lib.lua's helpers, then ``body`` (a script cannot include another)."""
    return (resources.files("docllm.adapters.redis") / "lua" / "lib.lua").read_text("utf-8") + "\n" + body


@functools.cache
def _script_text(name: str) -> str:
    return with_lib((resources.files("docllm.adapters.redis") / "lua" / f"{name}.lua").read_text("utf-8"))


def queue_scripts(client: RedisClient) -> dict[str, Script]:
    """The queue's scripts registered on ``client``: loaded on first use and again after NOSCRIPT."""
    return {name: client.register_script(_script_text(name)) for name in SCRIPT_NAMES}


class RedisTaskQueue:
    """Ready list, leases, delayed retries and dead letters in Redis; see ``RedisKeys``."""

    def __init__(
        self,
        client: RedisClient,
        keys_or_prefix: RedisKeys | str = "docllm",
        clock: Clock | None = None,
        token_factory: Callable[[], str] | None = None,
        promote_batch: int = 100,
        page_size: int = 1000,
        wait_replicas: int = 0,
        wait_timeout_ms: int = WAIT_TIMEOUT_MS,
    ):
        self._client = client
        self._keys = RedisKeys.of(keys_or_prefix)
        self._clock = clock or RedisServerClock(client, key=self._keys.ready)
        if isinstance(self._clock, RedisServerClock):
            self._clock.watch_steps(self.note_clock_step)
        self._new_token = token_factory or (lambda: uuid.uuid4().hex)
        self._promote_batch = promote_batch
        self._page_size = page_size
        self._scripts = queue_scripts(client)
        self._wait = (wait_replicas, wait_timeout_ms) if wait_replicas > 0 else None

    @property
    def keys(self) -> RedisKeys:
        return self._keys

    def _errors(self, what: str):
        """``redis_errors`` that also points the client at the primary again after a failover."""
        return redis_errors(what, functools.partial(recover, self._client))

    def _run(self, name: str, *args: Any) -> Any:
        with self._errors(name):
            if self._wait is not None and name in WAITED_SCRIPTS:
                return self._run_and_wait(name, list(args), *self._wait)
            return self._scripts[name](keys=self._keys.script_keys, args=list(args))

    def _run_and_wait(self, name: str, args: list[Any], replicas: int, timeout_ms: int) -> Any:
        """The script, then ``WAIT`` on the same connection (WAIT counts that connection's writes),
        on the node that owns the queue's slot. Best effort: after the timeout the result stands
        even with fewer copies (the lease-loss rule, the reaper and the reconciler cover the rest)."""
        pipe = node_for(self._client, self._keys.ready).pipeline(transaction=False)
        self._scripts[name](keys=self._keys.script_keys, args=args, client=pipe)
        pipe.execute_command("WAIT", replicas, timeout_ms)
        result, _copies = pipe.execute()
        return result

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def push(self, raw: str, front: bool = False) -> None:
        with self._errors("push"):
            if front:
                self._client.rpush(self._keys.ready, _wire(raw))
            else:
                self._client.lpush(self._keys.ready, _wire(raw))

    def claim(self, holder: str, lease_ms: int) -> Delivery | None:
        found = self.claim_batch(holder, lease_ms, 1)
        return found[0] if found else None

    def claim_batch(self, holder: str, lease_ms: int, limit: int) -> list[Delivery]:
        if limit <= 0:
            return []
        now = self._clock.now_ms()
        tokens = [self._new_token() for _ in range(limit)]
        found = self._run("claim", now, lease_ms, holder, self._promote_batch, *tokens)
        return [
            Delivery(_text(raw), token, now + lease_ms, holder, now, cancelled=bool(marked))
            for raw, marked, token in zip(found[::2], found[1::2], tokens, strict=False)
        ]  # fewer payloads than tokens: fine

    def stage(self, timeout_s: float) -> str | None:
        """``BLMOVE ready staging``: one waiter wakes per pushed payload (a no-op ``ready ready``
        move would wake every waiter). Blocks on a pooled connection of its own with a read timeout
        longer than the block, so the client's ``socket_timeout`` cannot cut it short."""
        keys = self._keys
        with self._errors("stage"):
            if timeout_s < 0.001:  # BLMOVE's timeout 0 would block forever
                raw = self._client.lmove(keys.ready, keys.staging, "RIGHT", "LEFT")
            else:
                raw = self._blocking(
                    "BLMOVE", keys.ready, keys.staging, "RIGHT", "LEFT", f"{timeout_s:.3f}", timeout_s=timeout_s
                )
        return None if raw is None else _text(raw)

    def lease_staged(self, raw: str, holder: str, lease_ms: int) -> Delivery | None:
        now, token = self._clock.now_ms(), self._new_token()
        leased = self._run("lease_staged", _wire(raw), now, lease_ms, token, holder)
        if not leased:
            return None
        return Delivery(raw, token, now + lease_ms, holder, now, cancelled=int(leased) == 2)

    def unstage(self, grace_ms: int, limit: int) -> int:
        return int(self._run("unstage", self._clock.now_ms(), grace_ms, limit))

    def clamp(self, lease_ms: int, max_delay_ms: int, limit: int) -> int:
        return int(self._run("clamp", self._clock.now_ms(), lease_ms, max_delay_ms, limit, CLAMP_SLACK_MS))

    def _blocking(self, *command: str, timeout_s: float) -> Any:
        # On a Cluster: the pool of the node that owns the queue's slot (every key shares it).
        pool = node_for(self._client, self._keys.ready).connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command(*command)
            return conn.read_response(timeout=timeout_s + BLOCK_READ_MARGIN_S)
        finally:
            pool.release(conn)

    def extend(self, token: str, lease_ms: int) -> bool:
        return self.extend_many([token], lease_ms)[0]

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        if not tokens:
            return []
        return [bool(ok) for ok in self._run("extend_many", self._clock.now_ms(), lease_ms, *tokens)]

    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        self._run("clock_step", new_ms, old_ms, since_ms, lease_ms)  # never reads the clock: it is reporting

    def lease_exists(self, token: str) -> bool:
        with self._errors("lease_exists"):
            return self._client.zscore(self._keys.lease_index, token) is not None

    def ack(self, token: str) -> bool:
        return bool(self._run("ack", token))

    def retry_later(self, token: str, delay_ms: int) -> bool:
        return bool(self._run("retry_later", token, self._clock.now_ms() + max(0, delay_ms)))

    def requeue(self, token: str, front: bool = False) -> bool:
        return bool(self._run("requeue", token, "1" if front else "0"))

    def dead_letter(
        self, token: str | None, raw: str, reason: str, task_id: int | None = None, unless_lettered: bool = False
    ) -> bool:
        tid = "" if task_id is None else task_id
        once = "1" if unless_lettered and not token else ""
        return bool(self._run("dead_letter", token or "", _wire(raw), reason, self._clock.now_ms(), tid, once))

    def expired(self, limit: int, start: float = 0.0) -> list[Delivery]:
        """Only the expired members of the lease index are read. An index entry without lease data
        (no script writes one) is removed by the script and not returned: nothing to recover."""
        if limit <= 0:
            return []
        flat = self._run("expired", self._clock.now_ms(), limit, repr(min(max(start, 0.0), 0.999999)))
        return [_delivery(flat[i], flat[i + 1], json.loads(_text(flat[i + 2]))) for i in range(0, len(flat), 3)]

    def in_flight(self, limit: int) -> list[Delivery]:
        """For display: scans every lease in pages (O(in flight)), so keep it off hot paths."""
        if limit <= 0:
            return []
        with self._errors("in_flight"):
            scan = self._client.hscan_iter(self._keys.leases, count=self._page_size)
            leases = {_text(token): json.loads(_text(data)) for token, data in scan}
            oldest = heapq.nsmallest(limit, leases, key=lambda token: (leases[token]["claimed_at"], token))
            deadlines = self._client.zmscore(self._keys.lease_index, oldest) if oldest else []
        return [
            _delivery(token, deadline, leases[token])
            for token, deadline in zip(oldest, deadlines, strict=True)
            if deadline is not None  # ended between the two reads
        ]

    def promote_due(self, limit: int) -> int:
        """In steps of ``page_size``, so no single script holds the server for long."""
        now, moved = self._clock.now_ms(), 0
        while moved < limit:
            step = min(limit - moved, self._page_size)
            done = int(self._run("promote", now, step))
            moved += done
            if done < step:
                break
        return moved

    def referenced_task_ids(self) -> set[int]:
        named, cursor = self.referenced_page(None, self._page_size)
        while cursor is not None:
            more, cursor = self.referenced_page(cursor, self._page_size)
            named |= more
        return named

    def referenced_page(self, cursor: Any, limit: int) -> tuple[set[int], Any]:
        """Delayed (ZSCAN), then ready (LRANGE by index from the newest end: a claim takes from
        the other end and an LPUSH only makes a page read again), then staging, then leases (HSCAN): the order
        payloads move in, so one moving during the lap is seen at least once. (A move against
        that flow, a requeue or a retry during the lap, can be missed; the reconciler's grace
        and fencing cover it.) About ``limit`` payloads per call, whatever the queue holds; a
        small queue is read whole in one call."""
        step: Any = cursor or ("delayed", 0)
        named: set[int] = set()
        left = max(1, limit)
        with self._errors("referenced_page"):
            while step is not None and left > 0:
                raws, step = self._scan_step(step, left)
                named |= {tid for tid in map(task_id_of, map(_text, raws)) if tid is not None}
                left -= max(len(raws), 10)  # a SCAN page may come back empty
        return named, step

    def _scan_step(self, step: tuple[str, int], limit: int) -> tuple[list[Any], Any]:
        stage, at = step
        keys, client = self._keys, self._client
        if stage == "delayed":
            at, found = client.zscan(keys.delayed, at, count=limit)
            return [member for member, _ in found], ("delayed", at) if at else ("ready", 0)
        if stage == "ready":
            raws = client.lrange(keys.ready, at, at + limit - 1)
            return raws, ("ready", at + limit) if len(raws) == limit else ("staging", 0)
        if stage == "staging":  # payloads between a blocking claimer's two steps: a handful
            return client.lrange(keys.staging, 0, -1), ("leases", 0)
        at, found_fields = client.hscan(keys.leases, at, count=limit)
        # redis-py types HSCAN as dict | list (the list is for no_values=True only, not used here)
        fields = cast(dict[bytes | str, bytes | str], found_fields)
        return [json.loads(_text(data))["raw"] for data in fields.values()], ("leases", at) if at else None

    def lead(self, role: str, holder: str, ttl_ms: int) -> bool:
        with self._errors("lead"):
            args: list[str | int] = [holder.replace(" ", "_"), self._clock.now_ms(), ttl_ms]
            return bool(self._scripts["lead"](keys=[self._keys.lead(role)], args=args))

    def leftovers(self, limit: int) -> Leftovers:
        """O(1) when nothing can be left over, else one consistent read of what is in flight (see
        leftovers.lua), so what it reports was lease-less at that instant. A stamp left over while
        leases without a stamp of their own are in flight is found once they end."""
        found = self._run("leftovers")
        if not found:
            return Leftovers()
        entries, flat_stamps, leases = found
        held = [json.loads(_text(data)) for data in leases]
        extra = Counter(map(_text, reversed(entries)))  # from the tail: oldest first
        extra.subtract(Counter(lease["raw"] for lease in held))
        named = {int(lease["task_id"]) for lease in held if isinstance(lease.get("task_id"), (int, float))}
        payloads = [raw for raw, count in extra.items() for _ in range(count)]  # count <= 0: none
        stamps = []
        for key, value in zip(flat_stamps[::2], flat_stamps[1::2], strict=True):
            task_id = _text(key)
            if task_id.isdigit() and int(task_id) not in named:  # every writer's key is a task id
                stamps.append((int(task_id), _text(value)))
        limit = max(0, limit)
        return Leftovers(tuple(payloads[:limit]), tuple(sorted(stamps)[:limit]))

    def release_leftovers(self, payloads: Sequence[str], stamps: Sequence[tuple[int, str]], seen_at_ms: int) -> int:
        pairs = [part for task_id, value in stamps for part in (task_id, _wire(value))]
        return int(self._run("release_leftovers", seen_at_ms // 1000, len(payloads), *map(_wire, payloads), *pairs))

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Newest first."""
        if limit <= 0:
            return []
        with self._errors("dead_letters"):
            entries = self._client.lrange(self._keys.dead, 0, limit - 1)
        return [_dead_letter(entry) for entry in entries]

    def remove_dead_letters(self, task_ids: Collection[int] | None) -> list[DeadLetter]:
        """One script: one pass over the list for any number of tasks (O(dead letters + ids))."""
        if task_ids is not None and not task_ids:
            return []
        ids = ["*"] if task_ids is None else [str(int(t)) for t in task_ids]
        return [_dead_letter(entry) for entry in self._run("remove_dead", *ids)]

    def mark_cancelled(self, task_ids: Collection[int]) -> None:
        if task_ids:
            now = self._clock.now_ms()
            with redis_errors("mark_cancelled"):
                self._client.hset(self._keys.cancelled, mapping={str(int(t)): now for t in task_ids})

    def cancel_marks(self, task_ids: Collection[int]) -> set[int]:
        ids = [int(t) for t in task_ids]
        if not ids:
            return set()
        with redis_errors("cancel_marks"):
            found = self._client.hmget(self._keys.cancelled, [str(t) for t in ids])
        return {t for t, at in zip(ids, found, strict=True) if at is not None}

    def clear_cancelled(self, task_ids: Collection[int]) -> None:
        if task_ids:
            with redis_errors("clear_cancelled"):
                self._client.hdel(self._keys.cancelled, *[str(int(t)) for t in task_ids])

    def stats(self) -> QueueStats:
        """``oldest_claimed_at_ms`` has whole-second precision here (see stats.lua)."""
        ready, processing, delayed, dead, oldest = self._run("stats")
        return QueueStats(ready, processing, delayed, dead, None if oldest is None else int(oldest))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _wire(raw: str | bytes) -> bytes:
    return raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw


def _delivery(token: bytes | str, deadline: bytes | float, lease: dict[str, Any]) -> Delivery:
    return Delivery(
        raw=lease["raw"],
        token=_text(token),
        deadline_ms=int(float(deadline)),
        holder=lease.get("holder", ""),
        claimed_at_ms=int(lease.get("claimed_at", 0)),
    )


def _dead_letter(entry: bytes | str) -> DeadLetter:
    text = _text(entry)
    try:
        data = json.loads(text)
        task_id = data.get("task_id")
        return DeadLetter(
            raw=data["payload"],
            reason=data.get("reason", ""),
            at_ms=int(data.get("at_ms", 0)),
            task_id=None if task_id is None else int(task_id),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        # Written by someone else: keep it visible rather than fail the whole listing.
        return DeadLetter(raw=text, reason="unreadable dead-letter entry", at_ms=0)
