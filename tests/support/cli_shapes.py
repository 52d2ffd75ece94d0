"""The CLI's JSON shapes that several tests check, written once."""

from __future__ import annotations

# `docllm stats --json` -> llm.breaker of a fleet whose LLM has not failed
CLOSED_BREAKER = {
    "state": "closed",
    "open_s": 0.0,
    "open_total_s": 0.0,
    "transitions": 0,
    "window_calls": 0,
    "window_failures": 0,
}

# `docllm status --json`: the fields of each task (at least); `docllm show --json`: exactly these
STATUS_FIELDS = frozenset(
    {"task_id", "task_name", "status", "attempt", "retry_count", "result", "error", "created_at", "finished_at"}
)
SHOW_FIELDS = STATUS_FIELDS | {"max_attempts", "processing_started_at", "updated_at", "usage", "rubric"}

# `docllm stats --json` -> batches -> shown: the fields of each batch. "batches" of `stats --json`
# (and of `show --json`) is absent, not empty, while no batch is recorded (holds the task): the
# shapes of a fleet without the batch lane stay as they were (issue 28).
BATCH_FIELDS = ("ref", "batch_id", "deployment", "state", "provider_status", "tasks", "age_s", "cost_usd")
