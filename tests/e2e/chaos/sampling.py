"""What a chaos run measures while the faults go on: the longest a task is in processing, the backlog."""

from __future__ import annotations

import sqlalchemy as sa

from tests.e2e.harness import Probe


class Sampler:
    def __init__(self, probe: Probe):
        self.probe = probe
        self.max_lease_age_s = 0.0
        self.max_row_processing_s = 0.0
        self.max_backlog = 0

    def sample(self) -> None:
        try:
            now = self.probe.redis_now_ms()
            leases = self.probe.leases()
            backlog = self.probe.redis.llen(self.probe.keys.ready)
            with self.probe.engine.connect() as conn:
                age = conn.execute(
                    sa.text(
                        "SELECT MAX(TIMESTAMPDIFF(MICROSECOND, processing_started_at, UTC_TIMESTAMP(6))) "
                        "FROM task_doc_llm WHERE status = 'processing'"
                    )
                ).scalar()
        except Exception:  # noqa: BLE001 - a server is down right now
            return
        if leases:
            self.max_lease_age_s = max(self.max_lease_age_s, max(now - int(x["claimed_at"]) for x in leases) / 1000)
        if age is not None:
            self.max_row_processing_s = max(self.max_row_processing_s, float(age) / 1e6)
        self.max_backlog = max(self.max_backlog, backlog)
