"""The TaskQueue port over Redis (ARCHITECTURE.md, Redis layout, Operations, Clocks), one module per
role: ``base`` holds the client, keys, scripts and clock every role shares; each other module is one
role's methods (``domain.ports``) as a mixin over it, and ``RedisTaskQueue`` combines them."""

from __future__ import annotations

from docllm.adapters.redis.queue.base import (
    BLOCK_READ_MARGIN_S,
    SCRIPT_NAMES,
    WAIT_TIMEOUT_MS,
    WAITED_SCRIPTS,
    QueueBase,
    queue_scripts,
    script_text,
    with_lib,
)
from docllm.adapters.redis.queue.cancel_marks import CancelMarksOps
from docllm.adapters.redis.queue.claims import ClaimsOps
from docllm.adapters.redis.queue.inspection import InspectionOps
from docllm.adapters.redis.queue.leadership import LeadershipOps
from docllm.adapters.redis.queue.leases import LeasesOps
from docllm.adapters.redis.queue.leftovers import LeftoversOps
from docllm.adapters.redis.queue.recovery import CLAMP_SLACK_MS, RecoveryOps
from docllm.adapters.redis.queue.scan import ScanOps
from docllm.adapters.redis.queue.step_log import ClockStepOps

__all__ = [
    "BLOCK_READ_MARGIN_S",
    "CLAMP_SLACK_MS",
    "SCRIPT_NAMES",
    "WAITED_SCRIPTS",
    "WAIT_TIMEOUT_MS",
    "RedisTaskQueue",
    "queue_scripts",
    "script_text",
    "with_lib",
]


class RedisTaskQueue(
    ClaimsOps,
    LeasesOps,
    RecoveryOps,
    InspectionOps,
    ScanOps,
    LeadershipOps,
    LeftoversOps,
    ClockStepOps,
    CancelMarksOps,
    QueueBase,
):
    """Ready list, leases, delayed retries and dead letters in Redis; see ``RedisKeys``."""
