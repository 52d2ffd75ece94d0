"""The Redis key names of one queue (ARCHITECTURE.md, Redis layout), derived from a prefix."""

from __future__ import annotations

from dataclasses import dataclass, field

# attribute -> key under the prefix. The first three are the original note's names, so producers
# that `LPUSH docllm:queue:ready '{"task_id": 7, "task_name": "x"}'` keep working.
_SUFFIXES = {
    "ready": "queue:ready",  # list: producers LPUSH, claims take from the right (FIFO)
    "processing": "queue:processing",  # list: leased payloads, in claim order (newest left)
    "processing_ts": "hash:processing_ts",  # task_id -> claim time in whole seconds (display)
    "lease_index": "zset:leases",  # token scored by lease deadline (ms)
    "leases": "hash:leases",  # token -> JSON {"raw", "holder", "claimed_at", "task_id"}
    "delayed": "zset:delayed",  # payload scored by the time it is due (ms)
    "dead": "queue:dead",  # JSON {"payload", "reason", "at_ms", "task_id"}, newest left
    "staging": "queue:staging",  # list: taken from ready by a blocking claimer, about to be leased
    "staging_seen": "hash:staging_seen",  # payload -> when the reaper first saw it staged (ms)
    "clock": "list:clock_steps",  # quiet windows after steps of the authority's clock (lib.lua)
    "cancelled": "hash:cancelled",  # task_id -> when an operator cancelled it (ms): read at heartbeats
    "workers": "zset:workers",  # worker id scored by when its record expires (ms): the registry's index
}


@dataclass(frozen=True)
class RedisKeys:
    """Key names under ``prefix``. A prefix with a hash tag (``{docllm}``) puts every key in one
    Redis Cluster slot, which the multi-key scripts need there."""

    prefix: str = "docllm"
    ready: str = field(init=False)
    processing: str = field(init=False)
    processing_ts: str = field(init=False)
    lease_index: str = field(init=False)
    leases: str = field(init=False)
    delayed: str = field(init=False)
    dead: str = field(init=False)
    staging: str = field(init=False)
    staging_seen: str = field(init=False)
    clock: str = field(init=False)
    cancelled: str = field(init=False)
    workers: str = field(init=False)

    def __post_init__(self) -> None:
        for name, suffix in _SUFFIXES.items():
            object.__setattr__(self, name, f"{self.prefix}:{suffix}")

    @property
    def script_keys(self) -> list[str]:
        """KEYS[1..11] of every queue script, in the order their headers name them (lua/lib.lua)."""
        return [
            self.ready,
            self.processing,
            self.lease_index,
            self.leases,
            self.delayed,
            self.dead,
            self.processing_ts,
            self.staging,
            self.staging_seen,
            self.clock,
            self.cancelled,
        ]

    @property
    def breaker(self) -> str:
        """The hash of the fleet's LLM circuit breaker (breaker.lua)."""
        return f"{self.prefix}:llm:breaker"

    def spend(self, day: int) -> str:
        """The fleet's LLM spend of one authority-clock day, in micro-dollars (budget.lua)."""
        return f"{self.prefix}:budget:spent:{day}"

    @property
    def spend_cap(self) -> str:
        """The fleet's daily spend cap set by an operator (``docllm budget set``), in micro-dollars."""
        return f"{self.prefix}:budget:cap"

    def lead(self, role: str) -> str:
        """The key of the fleet's lease on ``role`` (lead.lua)."""
        return f"{self.prefix}:lead:{role}"

    def worker(self, worker_id: str) -> str:
        """The hash of one worker's record (redis_registry.py); expires with its TTL."""
        return f"{self.prefix}:worker:{worker_id}"

    @classmethod
    def of(cls, keys_or_prefix: RedisKeys | str) -> RedisKeys:
        return keys_or_prefix if isinstance(keys_or_prefix, RedisKeys) else cls(keys_or_prefix)
