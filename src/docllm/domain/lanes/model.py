"""Lanes and tenants (issue 26, I13): named priorities with weights, tenants served round-robin
under per-tenant caps on tasks in flight. The order itself is the claim script's rule
(adapters/redis/lua/lanes.lua); this module holds the names, the value rules a payload's
``priority`` and ``tenant`` must follow (lanes.lua applies the same ones) and the settings' parsing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

LANES = ("interactive", "default", "bulk")  # the claim script's order; ties go to the earlier lane
DEFAULT_LANE = "default"
BATCH_LANE = "bulk"  # reviewed by the Batch API when a deployment offers it (issue 28)
DEFAULT_WEIGHTS = "interactive=8,default=3,bulk=1"
# A tenant is written as is into key fields ("tenant|seq"): no '|', no escapes; the column is 64 wide.
TENANT = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")


@dataclass(frozen=True)
class LanePolicy:
    """What the claim script is told on every claim: lane weights and tenant caps (0: no cap)."""

    weights: Mapping[str, int] = field(default_factory=lambda: parse_weights(DEFAULT_WEIGHTS))
    tenant_cap: int = 0
    tenant_caps: Mapping[str, int] = field(default_factory=dict)
    serves: tuple[str, ...] = ()  # the lanes claimed from (empty: every lane); the batch lane's split
    batch: bool = False  # the batch lane's claim: its members neither wait for nor count against a tenant cap

    def __post_init__(self) -> None:
        if unknown := [lane for lane in self.serves if lane not in LANES]:
            raise ValueError(f"unknown lane(s) {', '.join(unknown)}: the lanes are {', '.join(LANES)}")

    def serving(self, lanes: tuple[str, ...]) -> LanePolicy:
        """The same weights and caps, claiming from ``lanes`` only."""
        return replace(self, serves=tuple(lanes))

    def batching(self, lanes: tuple[str, ...]) -> LanePolicy:
        """The batch lane's claim from ``lanes``: a tenant cap bounds realtime work in flight (its
        interactive tasks must not wait for its bulk ones a provider batch holds for hours), so the
        members neither wait for it nor count against it; the batcher's own bound holds them."""
        return replace(self, serves=tuple(lanes), batch=True)

    def cap_of(self, tenant: str) -> int:
        return self.tenant_caps.get(tenant, self.tenant_cap)

    def script_arg(self) -> str:
        """``"8,3,1;0;acme=4,beta=2;interactive,default"``: weights in LANES order; default cap;
        overrides; the lanes served (empty: every lane); then ``;batch`` for the batch lane's claim."""
        weights = ",".join(str(self.weights[lane]) for lane in LANES)
        caps = ",".join(f"{t}={c}" for t, c in sorted(self.tenant_caps.items()))
        served = f";{','.join(self.serves)}" if self.serves or self.batch else ""
        return f"{weights};{self.tenant_cap};{caps}{served}{';batch' if self.batch else ''}"


def parse_weights(text: str) -> dict[str, int]:
    """``interactive=8,default=3,bulk=1`` -> weights; every lane named once, each 1..1000."""
    found = _pairs(text, "lane weights")
    if set(found) != set(LANES):
        raise ValueError(f"name each lane once ({', '.join(LANES)}), got {text!r}")
    for lane, weight in found.items():
        if not 1 <= weight <= 1000:
            raise ValueError(f"weight of {lane} must be 1..1000, got {weight}")
    return found


def parse_caps(text: str) -> dict[str, int]:
    """``acme=4,beta=2`` -> per-tenant caps (0: no cap for that tenant); empty text: none."""
    caps = _pairs(text, "tenant caps") if text.strip() else {}
    for tenant, cap in caps.items():
        if not TENANT.fullmatch(tenant) or cap < 0:
            raise ValueError(f"bad tenant cap {tenant}={cap}")
    return caps


def lane_error(priority: str) -> str | None:
    return None if priority in LANES else f"priority must be one of {', '.join(LANES)}, got {priority[:80]!r}"


def tenant_error(tenant: str) -> str | None:
    if TENANT.fullmatch(tenant):
        return None
    return f"tenant must be 1-64 of letters, digits and _.:@-, got {tenant[:80]!r}"


def _pairs(text: str, what: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or not name or name in found or not value.strip().isdigit():
            raise ValueError(f"{what}: expected name=integer pairs separated by commas, got {text!r}")
        found[name] = int(value)
    return found
