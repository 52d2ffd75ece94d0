"""Quiet windows after steps of the authority clock (ARCHITECTURE.md, Clocks): the in-memory mirror of
lib.lua's ``clock_quiet`` and ``renewable`` and of clock_step.lua; read the reasons there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KEPT = 32


@dataclass
class ClockSteps:
    windows: list[tuple[int, int, int]] = field(default_factory=list)  # (from, until, floor), oldest first

    def record(self, new_ms: int, old_ms: int, since_ms: int, lease_ms: int) -> None:
        floor = min(new_ms, old_ms) - since_ms
        span = lease_ms + lease_ms // 3
        for at in (new_ms, old_ms):
            self.windows.append((at - since_ms, at - since_ms + span, floor))
        del self.windows[:-KEPT]

    def quiet(self, now: int) -> int | None:
        """The lowest floor of the windows ``now`` falls in, or None."""
        return min((floor for start, until, floor in self.windows if start <= now < until), default=None)

    def renewable(self, deadline_ms: int, now: int) -> bool:
        if deadline_ms >= now:
            return True
        floor = self.quiet(now)
        return floor is not None and deadline_ms > floor
