"""The reference model of the claim order (issue 26, I13): lanes.lua's rule in plain Python, for
tests/property/test_lanes.py to hold the script to, claim by claim.

Lanes: smooth weighted round robin over the lanes with work (each gains its weight, the richest is
served and pays the total; a lane without work keeps no credit; ties go to the earlier lane).
Inside a lane, its plain list (no tenant) and its tenant ring take turns; the ring serves tenants
in turn, and a tenant at its cap leaves the ring (parked) until one of its leases ends.
Redis lists are deques here: LPUSH is ``appendleft``, RPOP is ``pop``.
"""

from __future__ import annotations

from collections import defaultdict, deque

from docllm.domain.lanes.model import LANES, LanePolicy

TRIES = 64  # claim.lua: pops per claim


class LanesModel:
    def __init__(self, policy: LanePolicy):
        self.policy = policy
        self.plain: dict[str, deque[str]] = {lane: deque() for lane in LANES}
        self.ring: dict[str, deque[str]] = {lane: deque() for lane in LANES}
        self.queues: dict[str, dict[str, deque[str]]] = {lane: defaultdict(deque) for lane in LANES}
        self.parked: dict[str, set[str]] = {lane: set() for lane in LANES}
        self.in_flight: dict[str, int] = defaultdict(int)
        self.credit: dict[str, int] = defaultdict(int)
        self.turn: dict[str, str] = {}

    # -- what the scripts do with a payload of (lane, tenant) ---------------------------------------
    def push(self, raw: str, lane: str, tenant: str | None, front: bool = False) -> None:
        if tenant is None:
            self.plain[lane].append(raw) if front else self.plain[lane].appendleft(raw)
            return
        queue = self.queues[lane][tenant]
        if not queue and tenant not in self.parked[lane]:
            self.ring[lane].appendleft(tenant)
        queue.appendleft(raw) if front else queue.append(raw)

    def lease_ended(self, tenant: str | None) -> None:
        if tenant is None:
            return
        self.in_flight[tenant] -= 1
        for lane in LANES:
            if tenant in self.parked[lane]:
                self.parked[lane].discard(tenant)
                self.ring[lane].appendleft(tenant)

    def claim(self, routes: dict[str, tuple[str, str | None]]) -> str | None:
        """The next payload (``routes``: payload -> its lane and tenant), or None."""
        for _ in LANES:
            lane = self._pick_lane()
            if lane is None:
                return None
            raw = self._from_lane(lane)
            if raw is not None:
                tenant = routes[raw][1]
                if tenant is not None:
                    self.in_flight[tenant] += 1
                return raw
        return None

    # -- the claim's steps ----------------------------------------------------------------------------
    def has_work(self, lane: str) -> bool:
        return bool(self.plain[lane] or self.ring[lane])

    def _pick_lane(self) -> str | None:
        best, total = None, 0
        for lane in LANES:
            if self.has_work(lane):
                self.credit[lane] += self.policy.weights[lane]
                total += self.policy.weights[lane]
                if best is None or self.credit[lane] > self.credit[best]:
                    best = lane
            else:
                self.credit[lane] = 0
        if best is not None:
            self.credit[best] -= total
        return best

    def _from_lane(self, lane: str) -> str | None:
        ring_first = self.turn.get(lane) == "ring" and bool(self.ring[lane])
        self.turn[lane] = "plain" if ring_first else "ring"
        raw = self._from_ring(lane) if ring_first else None
        if raw is None and self.plain[lane]:
            raw = self.plain[lane].pop()
        if raw is None and not ring_first:
            raw = self._from_ring(lane)
        return raw

    def _from_ring(self, lane: str, tries: int = TRIES) -> str | None:
        while tries > 0 and self.ring[lane]:
            tenant = self.ring[lane].pop()
            tries -= 1
            cap = self.policy.cap_of(tenant)
            if cap > 0 and self.in_flight[tenant] >= cap:
                self.parked[lane].add(tenant)
                continue
            queue = self.queues[lane][tenant]
            raw = queue.popleft() if queue else None
            if queue:
                self.ring[lane].appendleft(tenant)
            if raw is not None:
                return raw
        return None
