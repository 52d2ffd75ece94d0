"""What operators see of lanes and tenants (issue 26): depth, in flight, wait and throughput.

A store reads its rows into a ``Tally`` (``add`` per group of rows), which makes the figures;
both the SQL store and the in-memory one use it, so the arithmetic exists once.

Wait is the time from the row's creation to the start of its attempt, and only rows whose
attempt counter is 1 are sampled: the row keeps the start of its latest attempt only, so for a
task that was retried or handed back the first start is gone, and the latest one would count its
earlier attempts and backoff as waiting. Waits are kept in fixed buckets (``WAIT_BUCKETS``), so a
quantile is the upper bound of the bucket it falls in ("p95 <= 30 s"), as in Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import IntEnum

from docllm.domain.lanes.model import DEFAULT_LANE as DEFAULT_LANE  # one list of lanes: the claim script's
from docllm.domain.lanes.model import LANES as LANES

# Upper bounds (seconds) of the wait buckets; waits beyond the last fall in one more bucket.
WAIT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
MAX_TOP_TENANTS = 100  # tenants are shown as the top N by depth; N is bounded for screens and metrics
# What stats, the dashboard and the metrics show: ended rows of the last hour, the ten deepest tenants.
SHOWN_WINDOW_S = 3600
SHOWN_TOP_TENANTS = 10


class Kind(IntEnum):
    """Which figure a row counts towards (the status, with both ends folded into ``finished``)."""

    pending = 0
    processing = 1
    finished = 2  # success or failed, ended within the window


def lane_of(priority: str | None) -> str:
    return priority or DEFAULT_LANE


def wait_bucket(seconds: float) -> int:
    """The index of the first bucket whose bound is at least ``seconds``."""
    for i, bound in enumerate(WAIT_BUCKETS):
        if seconds <= bound:
            return i
    return len(WAIT_BUCKETS)


@dataclass(frozen=True)
class GroupFigures:
    """One lane's or one tenant's figures. ``name`` None: the rows without a tenant."""

    name: str | None
    depth: int = 0  # pending rows
    in_flight: int = 0  # processing rows
    finished: int = 0  # rows that ended (success or failed) within the window
    waits: tuple[int, ...] = (0,) * (len(WAIT_BUCKETS) + 1)  # sampled waits per bucket
    oldest_pending_s: float | None = None  # age of its oldest pending row

    @property
    def wait_samples(self) -> int:
        return sum(self.waits)

    def wait_quantile(self, q: float) -> float | None:
        """The bound of the bucket that holds the ``q`` quantile; None without samples. Waits
        beyond the last bound report that bound (read it as "at least")."""
        total = self.wait_samples
        if not total:
            return None
        rank, seen = q * total, 0
        for i, n in enumerate(self.waits):
            seen += n
            if n and seen >= rank:
                return float(WAIT_BUCKETS[min(i, len(WAIT_BUCKETS) - 1)])
        return float(WAIT_BUCKETS[-1])


@dataclass(frozen=True)
class LaneFigures:
    window_s: int  # ``finished`` and the wait samples of ended rows cover this many seconds
    lanes: tuple[GroupFigures, ...]  # every lane of LANES in that order, then unknown names found
    # The top tenants by depth, then in flight, then done in the window, then name: a tenant whose
    # work all ended within the window is ranked too (issue 44), with its waits and done count.
    tenants: tuple[GroupFigures, ...]
    tenants_with_work: int = 0  # named tenants with pending or processing rows, shown or not
    others: GroupFigures | None = None  # every other tenant's rows of the window, as one (``OTHERS``)

    def per_minute(self, g: GroupFigures) -> float:
        """``g``'s tasks ended per minute over the window."""
        return round(g.finished * 60 / self.window_s, 3) if self.window_s else 0.0


# The name of the tenants beyond the top N, folded into one (metrics' labels stay bounded); no
# tenant can be so named (``lanes.TENANT`` has no parentheses), as "(none)" for rows without one.
OTHERS = "(other)"


@dataclass
class Tally:
    """Figures accumulated from grouped rows: ``add(name, kind, bucket, count, oldest_age_s)``."""

    groups: dict[str | None, GroupFigures] = field(default_factory=dict)

    def add(self, name: str | None, kind: Kind, bucket: int | None, count: int, oldest_s: float | None = None) -> None:
        g = self.groups.get(name) or GroupFigures(name)
        if kind is Kind.pending:
            older = oldest_s if g.oldest_pending_s is None else max(g.oldest_pending_s, oldest_s or 0.0)
            g = replace(g, depth=g.depth + count, oldest_pending_s=older)
        elif kind is Kind.processing:
            g = replace(g, in_flight=g.in_flight + count)
        else:
            g = replace(g, finished=g.finished + count)
        if bucket is not None:
            waits = list(g.waits)
            waits[bucket] += count
            g = replace(g, waits=tuple(waits))
        self.groups[name] = g

    def lanes(self) -> tuple[GroupFigures, ...]:
        known = tuple(self.groups.get(lane) or GroupFigures(lane) for lane in LANES)
        return known + tuple(g for name, g in sorted(self.groups.items(), key=_by_name) if name not in LANES)

    def ranked(self, names: Iterable[str | None]) -> tuple[GroupFigures, ...]:
        """The figures of ``names`` in the order of ``top_tenants_order``."""
        return tuple(sorted((self.groups.get(n) or GroupFigures(n) for n in names), key=top_tenants_order))


def top_tenants_order(g: GroupFigures) -> tuple[int, int, int, bool, str]:
    """Deepest first, then most in flight, then most done in the window, then by name (no tenant
    first, as SQL sorts NULL)."""
    return (-g.depth, -g.in_flight, -g.finished, g.name is not None, g.name or "")


def _by_name(item: tuple[str | None, GroupFigures]) -> str:
    return item[0] or ""


def checked_top(top: int) -> int:
    if not 0 <= top <= MAX_TOP_TENANTS:
        raise ValueError(f"top tenants must be between 0 and {MAX_TOP_TENANTS}, not {top}")
    return top
