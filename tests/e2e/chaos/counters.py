"""What a chaos run did: the faults and submits, counted for the summary and the test's asserts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counters:
    worker_kills: int = 0
    reaper_kills: int = 0
    worker_sigterms: int = 0
    worker_pauses: int = 0
    worker_restarts: int = 0
    reaper_restarts: int = 0
    redis_restarts: int = 0
    redis_crashes: int = 0
    redis_flushes: int = 0
    redis_failovers: int = 0  # Sentinel mode: the primary SIGKILLed, the replica promoted
    mariadb_restarts: int = 0
    mariadb_crashes: int = 0
    rows_deleted: int = 0
    malformed_pushed: int = 0
    submits: int = 0
    net_latency_bursts: int = 0
    net_blackholes: int = 0
    net_resets: int = 0
    net_dropped_replies: int = 0  # replies of a commit or a script that ran, dropped (counted by the proxy)
    submit_failures: int = 0

    @property
    def kills(self) -> int:
        return self.worker_kills + self.reaper_kills
