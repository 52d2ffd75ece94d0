"""Lanes and tenants in the simulation (issue 26): which lane and tenant a run's task is given, and
I13 ("no lane starves") checked on every claim the fleet makes.

I13 here: a lane with work is passed over by at most ``2 * W * S + W`` claims in a row, W the sum
of the lane weights and S the sources a lane holds (its tenants and its plain list): the bound of
tests/property/test_lanes.py, plus W for a tenant at its cap that still sits in the ring until its
lane's next pick parks it. Tenant turns are the property test's; Redis data loss empties the lanes
(the reconciler re-queues each task into its own lane), which resets the count.
"""

from __future__ import annotations

import zlib
from typing import Any

from docllm.domain.errors import BadPayload
from docllm.domain.lanes.model import LANES
from docllm.domain.tasks.payload import parse_payload

TENANTS = (None, "acme", "beta")


def lane_for(name: str) -> tuple[str, str | None]:
    """The lane and tenant of the task ``name``: fixed by its name, so a run is deterministic."""
    h = zlib.crc32(name.encode())
    return LANES[h % len(LANES)], TENANTS[(h // len(LANES)) % len(TENANTS)]


class LaneWatch:
    def __init__(self, system: Any):
        self.sys = system
        policy = system.settings.lane_policy
        total = sum(policy.weights.values())
        self.bound = 2 * total * (len(TENANTS)) + total
        self.passed = dict.fromkeys(LANES, 0)
        # With batching on the batcher serves the bulk lane, not the realtime claim's weights.
        self.lanes = policy.serves or LANES

    def claimed(self, raws: list[str]) -> None:
        """After a claim script returned ``raws`` (nothing can run between: the sim is one thread)."""
        waiting = self._lanes_with_work()
        for raw in raws:
            try:
                served = parse_payload(raw, 1 << 30).priority or "default"
            except BadPayload:
                served = "default"  # a malformed payload sits in the default lane
            for lane in self.lanes:
                self.passed[lane] = 0 if lane == served or lane not in waiting else self.passed[lane] + 1
                if self.passed[lane] > self.bound:
                    self.sys.ledger.violate(
                        "I13", None, f"lane {lane} with work was passed over by {self.passed[lane]} claims", key=lane
                    )
        for lane in self.lanes:
            if lane not in waiting:
                self.passed[lane] = 0

    def _lanes_with_work(self) -> set[str]:
        k, c = self.sys.keys, self.sys.client
        plain = {"interactive": k.ready_interactive, "default": k.ready, "bulk": k.ready_bulk}
        ring = {"interactive": k.ring_interactive, "default": k.ring_default, "bulk": k.ring_bulk}
        return {lane for lane in LANES if c.llen(plain[lane]) or c.llen(ring[lane])}
