"""Forward steps of the authority clock as the fleet records them (DESIGN section 6): the
in-memory mirror of lib.lua's ``clock_quiet`` and ``renewable`` and of clock_step.lua; read the
reasons there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ClockSteps:
    quiet_until: int = 0  # no reclaims before this: a forward step was seen less than a lease ago
    step_from: int = 0  # the authority time just before that step
    steps: int = 0

    def record(self, quiet_until: int, step_from: int, now: int) -> bool:
        if quiet_until <= self.quiet_until:
            return False
        if self.quiet_until > now:  # within the period of an earlier report of this step
            step_from = min(step_from, self.step_from)
        self.quiet_until, self.step_from, self.steps = quiet_until, step_from, self.steps + 1
        return True

    def clamp(self, now: int, lease_ms: int) -> None:
        """A backward step after a forward one: the quiet period is measured on the new clock."""
        self.quiet_until = min(self.quiet_until, now + lease_ms)

    def quiet(self, now: int) -> bool:
        return now < self.quiet_until

    def renewable(self, deadline_ms: int, now: int) -> bool:
        return deadline_ms >= now or (self.quiet(now) and deadline_ms > self.step_from)
