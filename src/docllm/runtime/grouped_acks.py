"""The worker's queue with its acks grouped: attempts that end together end their leases in one
script call (``Leases.ack_many``) instead of one each.

At C = 1,024 an ack's round trip and script call were ~7 % of a worker's GIL time (py-spy,
docs/BENCHMARKS.md). The acks come from the port threads right after their commits, which the
store batcher already groups, so they arrive together; ``grouper.Grouper`` forms their groups (a
lone ack is not delayed). Each token is ended as if alone, and a group that fails (Redis down)
fails every ack in it, which each attempt handles as it would its own failed ack.
"""

from __future__ import annotations

from typing import Any

from docllm.runtime.grouper import Grouper


class GroupedAcks:
    """``queue``, but ``ack`` goes through a grouper; every other call goes straight to it."""

    def __init__(self, queue: Any, linger_s: float):
        self.queue = queue
        self.acks = Grouper(queue.ack_many, linger_s=linger_s)

    def ack(self, token: str) -> bool:
        return self.acks.submit(token)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


def grouped_acks(queue: Any, linger_ms: float) -> Any:
    """``queue`` with its acks grouped (``DOCLLM_STORE_LINGER_MS``, the store's writes' linger)."""
    return GroupedAcks(queue, linger_ms / 1000)
