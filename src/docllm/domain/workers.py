"""What the worker registry holds: one record per live worker process (DESIGN section 12)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InFlight:
    """One attempt a worker runs: its task, the attempt number and how long it has run."""

    task_id: int
    attempt: int
    age_s: float


@dataclass(frozen=True)
class WorkerRecord:
    """A worker process as it last reported itself (times are the authority's, in seconds)."""

    id: str
    host: str
    pid: int
    version: str
    slots: int
    in_flight: tuple[InFlight, ...]
    started_at: float
    last_beat: float
