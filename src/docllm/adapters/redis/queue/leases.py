"""The Leases role over Redis: renew, check and end a lease (ack, retry later, requeue, dead letter)."""

from __future__ import annotations

from docllm.adapters.redis.queue.base import QueueBase, wire


class LeasesOps(QueueBase):
    def extend(self, token: str, lease_ms: int) -> bool:
        return self.extend_many([token], lease_ms)[0]

    def extend_many(self, tokens: list[str], lease_ms: int) -> list[bool]:
        if not tokens:
            return []
        return [bool(ok) for ok in self._run("extend_many", self._fresh_ms(), lease_ms, *tokens)]

    def lease_exists(self, token: str) -> bool:
        with self._errors("lease_exists"):
            return self._client.zscore(self._keys.lease_index, token) is not None

    def ack(self, token: str) -> bool:
        return self.ack_many([token])[0]

    def ack_many(self, tokens: list[str]) -> list[bool]:
        if not tokens:
            return []
        return [bool(ok) for ok in self._run("ack", *tokens)]

    def retry_later(self, token: str, delay_ms: int) -> bool:
        return bool(self._run("retry_later", token, self._clock.now_ms() + max(0, delay_ms)))

    def requeue(self, token: str, front: bool = False) -> bool:
        return bool(self._run("requeue", token, "1" if front else "0"))

    def dead_letter(
        self, token: str | None, raw: str, reason: str, task_id: int | None = None, unless_lettered: bool = False
    ) -> bool:
        tid = "" if task_id is None else task_id
        once = "1" if unless_lettered and not token else ""
        return bool(self._run("dead_letter", token or "", wire(raw), reason, self._clock.now_ms(), tid, once))
