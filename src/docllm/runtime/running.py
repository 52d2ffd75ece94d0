"""One attempt in flight in a worker, and how it is abandoned."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from docllm.domain.tasks.model import Attempt
from docllm.domain.tasks.outcome import Outcome
from docllm.domain.tasks.verdict import Facts


@dataclass(eq=False)
class Running:
    attempt: Attempt
    started: float  # event-loop time
    renewed: float | None = None  # event-loop time the last renewal was sent
    review: asyncio.Task[Outcome | Facts] | None = None
    timer: asyncio.TimerHandle | None = None  # the runtime bound's next look (Worker._overran)
    abandoned: bool = False
    verdict: Outcome | None = None  # what an abandoned attempt writes; None: nothing (lease lost)
    # The review has ended and its outcome is being written (fenced): nothing abandons it now. Its
    # commit acks the lease, so a heartbeat sent meanwhile may find the lease gone: not a loss.
    settling: bool = False

    @property
    def decided(self) -> bool:
        """Abandoned, or its outcome being written: nothing abandons it (again)."""
        return self.abandoned or self.settling

    def abandon(self, verdict: Outcome | None) -> None:
        """Stop the attempt: its review is cancelled, and with it the LLM request in flight (I11)."""
        if self.decided:
            return
        self.abandoned, self.verdict = True, verdict
        if self.review is not None:
            self.review.cancel()
