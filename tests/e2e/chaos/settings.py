"""The chaos run's knobs: sizes, the product's settings, the LLM test server's, the faults'; the settle bound."""

from __future__ import annotations

from dataclasses import dataclass

from docllm.runtime.supervisor import child_stop_seconds
from docllm.settings import Settings


@dataclass
class ChaosSettings:
    tasks: int = 200
    fault_seconds: float = 60.0  # how long faults go on; documents are submitted all along
    workers: int = 4
    reapers: int = 2
    concurrency: int = 3
    seed: int = 0  # 0: a random seed (printed, and in the summary, to replay a run)
    topology: str = "single"  # or "sentinel": a Sentinel set, with failovers (tests/e2e/chaos/sentinel.py)
    # product settings (environment of every process)
    lease_s: float = 3.0
    reaper_interval_s: float = 0.5
    reconcile_interval_s: float = 1.0
    reconcile_grace_s: float = 3.0
    retry_base_s: float = 0.25
    retry_max_s: float = 2.0
    shutdown_grace_s: float = 2.0
    max_attempts: int = 10
    llm_timeout_s: float = 10.0
    database_timeout_s: float = 5.0  # a half-open database connection fails after this
    # the LLM test server
    llm_latency_ms: tuple[int, int] = (300, 2500)
    rate_429: float = 0.05
    rate_500: float = 0.05
    # faults
    process_fault_every_s: tuple[float, float] = (1.5, 3.5)
    network_fault_share: float = 0.1  # of the random faults, this share hits a process's links instead
    restart_after_s: tuple[float, float] = (0.2, 2.0)
    server_fault_every_s: float = 0.0  # 0: each server fault once; else a cycle of them this often
    worker_skews: tuple[str | None, ...] = (None, "+8h", "-7h", "+26h")
    reaper_skews: tuple[str | None, ...] = ("+5h", "-3h")
    submit_skew: str | None = "-9h"
    deleted_rows: int = 3
    min_kills: int = 10  # the phase goes on past its end (kills only) until this many SIGKILLs
    big_document_bytes: int = 10 * 1024 * 1024

    @classmethod
    def soak(cls) -> ChaosSettings:
        return cls(
            tasks=5000,
            fault_seconds=30 * 60.0,
            process_fault_every_s=(3.0, 8.0),
            server_fault_every_s=180.0,
            deleted_rows=10,
            reconcile_interval_s=2.0,
        )

    def env(self) -> dict[str, str]:
        return {
            "DOCLLM_LEASE_SECONDS": str(self.lease_s),
            "DOCLLM_REAPER_INTERVAL_SECONDS": str(self.reaper_interval_s),
            "DOCLLM_RECONCILE_INTERVAL_SECONDS": str(self.reconcile_interval_s),
            "DOCLLM_RECONCILE_GRACE_SECONDS": str(self.reconcile_grace_s),
            "DOCLLM_RETRY_BASE_SECONDS": str(self.retry_base_s),
            "DOCLLM_RETRY_MAX_SECONDS": str(self.retry_max_s),
            "DOCLLM_SHUTDOWN_GRACE_SECONDS": str(self.shutdown_grace_s),
            "DOCLLM_MAX_ATTEMPTS": str(self.max_attempts),
            "DOCLLM_CONCURRENCY": str(self.concurrency),
            "DOCLLM_LLM_TIMEOUT_SECONDS": str(self.llm_timeout_s),
            "DOCLLM_DATABASE_TIMEOUT_SECONDS": str(self.database_timeout_s),
            "DOCLLM_DATABASE_CONNECT_TIMEOUT_SECONDS": str(self.database_timeout_s),
            "DOCLLM_LLM_PROVIDER": "openai",
            "DOCLLM_LLM_API_KEY": "test-key",
            "DOCLLM_LLM_MODEL": "test-model",
        }

    @property
    def stop_limit_s(self) -> float:
        """How long a SIGTERMed worker may take to exit: what ``docllm worker --processes`` allows a
        child before it SIGKILLs it (the grace, the releases, the registry's leave, the exit
        watchdog's two stages and a margin; a run beside two CPU burners took 7.4 s, grace + 5 s)."""
        return child_stop_seconds(Settings(shutdown_grace_seconds=self.shutdown_grace_s, lease_seconds=self.lease_s))

    def settle_bound(self, backlog: int) -> float:
        """How long after the last fault every task must be settled (I2, ARCHITECTURE.md), in seconds.

        - a task Redis forgot (FLUSHALL) is recovered after two sightings ``grace`` apart: at most
          2 x (grace + reconcile interval);
        - then each of at most ``max_attempts`` attempts ends by an answer (at most the slowest
          LLM answer) or by lease expiry noticed by a reaper (lease + reaper interval), plus its
          backoff (capped at ``retry_max``, at least the 1 s a 429 asks for);
        - the ``backlog`` of tasks left when the faults stopped drains at ``slots`` at a time,
          each at most the slowest answer, with half the slots lost to failed attempts;
        - 10 s for processes restarted at the end to import and connect.
        """
        slowest = self.llm_latency_ms[1] / 1000
        recovery = 2 * (self.reconcile_grace_s + self.reconcile_interval_s)
        per_attempt = max(slowest, self.lease_s + self.reaper_interval_s) + max(self.retry_max_s, 1.0)
        slots = self.workers * self.concurrency
        drain = 2 * backlog * slowest / slots
        return recovery + self.max_attempts * per_attempt + drain + 10.0
