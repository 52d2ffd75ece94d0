"""The live workers of the fleet, as each process reports itself in the worker registry.

Times are unix seconds of the authority clock (the Redis server's), so records written by
processes whose own clocks disagree can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InFlight:
    """One attempt a worker is running: its task, its fencing number, how long it has run."""

    task_id: int
    attempt: int
    age_s: float


@dataclass(frozen=True)
class WorkerRecord:
    id: str
    host: str
    pid: int
    version: str
    slots: int
    in_flight: tuple[InFlight, ...]
    started_at: float
    last_beat: float
