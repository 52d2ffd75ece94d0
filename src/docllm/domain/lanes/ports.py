"""The port of lanes: their figures, read from the store.

Every time in these signatures is the authority's time (the Redis server's clock, ARCHITECTURE.md,
Clocks) in milliseconds; no port takes or returns a worker's wall clock.
"""

from __future__ import annotations

from typing import Protocol

from docllm.domain.lanes.figures import LaneFigures


class LaneViews(Protocol):
    """The figures of lanes and tenants (issue 26), for ``stats``, metrics and the dashboard."""

    def lane_figures(self, window_s: int, top_tenants: int) -> LaneFigures:
        """Per lane and for the ``top_tenants`` tenants with most pending rows: depth, in flight,
        waits of attempts started, rows ended within ``window_s`` of the store's now. Bounded
        reads: the rows not yet ended and those ended in the window, grouped by the store."""
