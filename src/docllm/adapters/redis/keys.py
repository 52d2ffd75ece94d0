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
    # Lanes and tenants (lua/lanes.lua): the default lane's plain list is `ready` itself.
    "ready_interactive": "queue:ready:interactive",  # list: interactive payloads with no tenant
    "ready_bulk": "queue:ready:bulk",  # list: bulk payloads with no tenant
    "ring_interactive": "queue:tenants:interactive",  # list: tenants with work in the lane, each once
    "ring_default": "queue:tenants:default",
    "ring_bulk": "queue:tenants:bulk",
    "tenant_queue_interactive": "hash:tenant_queue:interactive",  # each tenant's payloads in the lane
    "tenant_queue_default": "hash:tenant_queue:default",
    "tenant_queue_bulk": "hash:tenant_queue:bulk",
    "parked_interactive": "set:parked:interactive",  # tenants at their cap, out of the ring
    "parked_default": "set:parked:default",
    "parked_bulk": "set:parked:bulk",
    "tenant_in_flight": "hash:tenant_in_flight",  # tenant -> leases it holds
    "lane_state": "hash:lanes",  # weighted round-robin credit per lane, and whose turn in a lane
}
_LANE_KEYS = tuple(name for name in _SUFFIXES if name.startswith(("ready_", "ring_", "tenant_", "parked_", "lane_")))


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
    ready_interactive: str = field(init=False)
    ready_bulk: str = field(init=False)
    ring_interactive: str = field(init=False)
    ring_default: str = field(init=False)
    ring_bulk: str = field(init=False)
    tenant_queue_interactive: str = field(init=False)
    tenant_queue_default: str = field(init=False)
    tenant_queue_bulk: str = field(init=False)
    parked_interactive: str = field(init=False)
    parked_default: str = field(init=False)
    parked_bulk: str = field(init=False)
    tenant_in_flight: str = field(init=False)
    lane_state: str = field(init=False)

    def __post_init__(self) -> None:
        for name, suffix in _SUFFIXES.items():
            object.__setattr__(self, name, f"{self.prefix}:{suffix}")

    @property
    def script_keys(self) -> list[str]:
        """KEYS[1..24] of every queue script, in the order their headers name them (lua/lib.lua,
        then lua/lanes.lua)."""
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
            *self.lane_keys,
        ]

    @property
    def lane_keys(self) -> list[str]:
        """The lanes' keys (KEYS[12..24], lua/lanes.lua), in _SUFFIXES order."""
        return [getattr(self, name) for name in _LANE_KEYS]

    @property
    def breaker(self) -> str:
        """The hash of the fleet's LLM circuit breaker (breaker.lua)."""
        return f"{self.prefix}:llm:breaker"

    def spend(self, day: int) -> str:
        """The fleet's LLM spend of one authority-clock day, in micro-dollars (budget.lua)."""
        return f"{self.prefix}:budget:spent:{day}"

    def spend_by_deployment(self, day: int) -> str:
        """The hash of that day's spend per LLM deployment, name -> micro-dollars (budget.lua)."""
        return f"{self.prefix}:budget:spent:{day}:deployments"

    @property
    def spend_held(self) -> str:
        """The spend ledger's reservations in flight, key -> "micro|deployment" (budget.lua)."""
        return f"{self.prefix}:budget:held"

    @property
    def spend_held_until(self) -> str:
        """The same reservations scored by the authority ms they lapse at (budget.lua)."""
        return f"{self.prefix}:budget:held:until"

    @property
    def spend_held_by_deployment(self) -> str:
        """What the reservations in flight hold per deployment, name -> micro-dollars (budget.lua)."""
        return f"{self.prefix}:budget:held:deployments"

    @property
    def spend_cap(self) -> str:
        """The fleet's daily spend cap set by an operator (``docllm budget set``), in micro-dollars."""
        return f"{self.prefix}:budget:cap"

    def lead(self, role: str) -> str:
        """The key of the fleet's lease on ``role`` (lead.lua)."""
        return f"{self.prefix}:lead:{role}"

    def batch_lease(self, ref: str) -> str:
        """The lease on polling one provider batch (batch_lease.lua): a hash of token, owner, until."""
        return f"{self.prefix}:batch:lease:{ref}"

    def worker(self, worker_id: str) -> str:
        """The hash of one worker's record (redis_registry.py); expires with its TTL."""
        return f"{self.prefix}:worker:{worker_id}"

    @classmethod
    def of(cls, keys_or_prefix: RedisKeys | str) -> RedisKeys:
        return keys_or_prefix if isinstance(keys_or_prefix, RedisKeys) else cls(keys_or_prefix)
