"""The Claims role over Redis: push, claim (in batches), stage and lease what was staged."""

from __future__ import annotations

from docllm.adapters.redis.queue.base import QueueBase, text, wire
from docllm.domain.tasks.model import Delivery


class ClaimsOps(QueueBase):
    def push(self, raw: str, front: bool = False) -> None:
        """Into the payload's lane and tenant queue (lanes.lua): one script, as every other push."""
        self._run("push", wire(raw), "1" if front else "0")

    def claim(self, worker_id: str, lease_ms: int) -> Delivery | None:
        found = self.claim_batch(worker_id, lease_ms, 1)
        return found[0] if found else None

    def claim_batch(
        self, worker_id: str, lease_ms: int, limit: int, lanes: tuple[str, ...] | None = None
    ) -> list[Delivery]:
        if limit <= 0:
            return []
        now = self._clock.now_ms()
        tokens = [self._new_token() for _ in range(limit)]
        # Explicit lanes: the batch lane's batcher, whose members a tenant cap does not count.
        policy = self._lanes if lanes is None else self._policy.batching(lanes).script_arg()
        found = self._run("claim", now, lease_ms, worker_id, self._promote_batch, policy, *tokens)
        return [
            Delivery(text(raw), token, now + lease_ms, worker_id, now, cancelled=bool(marked))
            for raw, marked, token in zip(found[::2], found[1::2], tokens, strict=False)
        ]  # fewer payloads than tokens: fine

    def stage(self, timeout_s: float) -> str | None:
        """``BLMOVE ready staging``: one waiter wakes per pushed payload (a no-op ``ready ready``
        move would wake every waiter). Blocks on a pooled connection of its own with a read timeout
        longer than the block, so the client's ``socket_timeout`` cannot cut it short."""
        keys = self._keys
        with self._errors("stage"):
            if timeout_s < 0.001:  # BLMOVE's timeout 0 would block forever
                raw = self._client.lmove(keys.ready, keys.staging, "RIGHT", "LEFT")
            else:
                raw = self._blocking(
                    "BLMOVE", keys.ready, keys.staging, "RIGHT", "LEFT", f"{timeout_s:.3f}", timeout_s=timeout_s
                )
        return None if raw is None else text(raw)

    def lease_staged(self, raw: str, worker_id: str, lease_ms: int) -> Delivery | None:
        now, token = self._clock.now_ms(), self._new_token()
        leased = self._run("lease_staged", wire(raw), now, lease_ms, token, worker_id, ",".join(self._policy.serves))
        if not leased:
            return None
        return Delivery(raw, token, now + lease_ms, worker_id, now, cancelled=int(leased) == 2)
