"""What every role of the Redis queue shares: the client, the keys, the scripts and the clock.

Every change that touches more than one key is one Lua script from ``adapters/redis/lua/`` (atomic:
a crash leaves it done or not done), run with the authority's ``now_ms`` from the clock. The
client should not decode responses: payloads are kept byte for byte, and bytes that are not
UTF-8 travel through ``str`` as surrogate escapes.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from importlib import resources
from typing import Any

from redis.commands.core import Script

from docllm.adapters.redis.client import RedisClient
from docllm.adapters.redis.clock import RedisServerClock
from docllm.adapters.redis.errors import redis_errors
from docllm.adapters.redis.keys import RedisKeys
from docllm.adapters.redis.topology import node_for, recover
from docllm.domain.lanes.model import LanePolicy
from docllm.domain.tasks.model import DeadLetter, Delivery
from docllm.domain.tasks.ports import Clock

SCRIPT_NAMES = (
    "claim",
    "push",
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

# DOCLLM_REDIS_WAIT_REPLICAS: these scripts (a lease taken, a lease ended) wait for replicas.
WAITED_SCRIPTS = frozenset({"claim", "lease_staged", "ack"})
WAIT_TIMEOUT_MS = 1_000

# A blocked BLMOVE answers when its own timeout ends; the socket may wait this much longer.
BLOCK_READ_MARGIN_S = 5.0


def with_lib(body: str) -> str:
    """A queue script's source: lib.lua's and lanes.lua's helpers, then ``body`` (a script cannot
    include another)."""
    lua = resources.files("docllm.adapters.redis") / "lua"
    return "\n".join((lua / name).read_text("utf-8") for name in ("lib.lua", "lanes.lua")) + "\n" + body


@functools.cache
def script_text(name: str) -> str:
    """``lua/<name>.lua`` after lib.lua's helpers."""
    return with_lib((resources.files("docllm.adapters.redis") / "lua" / f"{name}.lua").read_text("utf-8"))


def queue_scripts(client: RedisClient) -> dict[str, Script]:
    """The queue's scripts registered on ``client``: loaded on first use and again after NOSCRIPT."""
    return {name: client.register_script(script_text(name)) for name in SCRIPT_NAMES}


class QueueBase:
    """The plumbing of ``RedisTaskQueue``; each role's methods are a mixin over it (see the package)."""

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
        lanes: LanePolicy | None = None,
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
        self._policy = lanes or LanePolicy()
        self._lanes = self._policy.script_arg()  # told to every claim (claim.lua)

    @property
    def keys(self) -> RedisKeys:
        return self._keys

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def _fresh_ms(self) -> int:
        """The authority's time read now, to renew this process's leases (RedisServerClock.fresh_ms)."""
        clock = self._clock
        return clock.fresh_ms() if isinstance(clock, RedisServerClock) else clock.now_ms()

    def _verdict_ms(self) -> int | None:
        """The authority's time read now, to find other processes' leases expired or too far out;
        None while the clock has nothing to check its reading against (RedisServerClock.verdict_ms)."""
        clock = self._clock
        return clock.verdict_ms() if isinstance(clock, RedisServerClock) else clock.now_ms()

    def note_clock_step(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        """The clock step log's (step_log.py); declared here because ``__init__`` hands it to the clock."""
        raise NotImplementedError

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

    def _blocking(self, *command: str, timeout_s: float) -> Any:
        # On a Cluster: the pool of the node that owns the queue's slot (every key shares it).
        pool = node_for(self._client, self._keys.ready).connection_pool
        conn = pool.get_connection()
        try:
            conn.send_command(*command)
            return conn.read_response(timeout=timeout_s + BLOCK_READ_MARGIN_S)
        finally:
            pool.release(conn)


def text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def wire(raw: str | bytes) -> bytes:
    return raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw


def delivery_of(token: bytes | str, deadline: bytes | float, lease: dict[str, Any]) -> Delivery:
    return Delivery(
        raw=lease["raw"],
        token=text(token),
        deadline_ms=int(float(deadline)),
        worker_id=lease.get("holder", ""),
        claimed_at_ms=int(lease.get("claimed_at", 0)),
    )


def dead_letter_of(entry: bytes | str) -> DeadLetter:
    raw = text(entry)
    try:
        data = json.loads(raw)
        task_id = data.get("task_id")
        return DeadLetter(
            raw=data["payload"],
            reason=data.get("reason", ""),
            at_ms=int(data.get("at_ms", 0)),
            task_id=None if task_id is None else int(task_id),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        # Written by someone else: keep it visible rather than fail the whole listing.
        return DeadLetter(raw=raw, reason="unreadable dead-letter entry", at_ms=0)
