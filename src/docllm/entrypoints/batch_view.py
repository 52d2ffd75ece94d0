"""How provider batches (issue 28) look in ``docllm stats`` (the "batches" object of ``--json``
and a table), in ``docllm show`` (the batches holding a task) and on the dashboard, which renders
the same objects. All of it is read from the BatchStore alone.

A fleet that never batched shows no batch at all: ``stats --json`` has no "batches" key and
``show --json`` no "batches" key (their shapes stay as they were without the batch lane).
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from docllm.domain.batches.model import Batch
from docllm.domain.batches.ports import BatchStore

SHOWN_RECENT = 20  # besides every unfinished batch (up to UNFINISHED_LIMIT), the newest ones
UNFINISHED_LIMIT = 100
SHORT_REF = 8
# JSON key -> table heading (short, the deployment left to --json: the table fits 80 columns)
TABLE_COLUMNS = {
    "ref": "ref",
    "batch_id": "batch id",
    "state": "state",
    "provider_status": "provider",
    "tasks": "tasks",
    "age_s": "age s",
    "cost_usd": "cost $",
}


def batch_json(batch: Batch, now_ms: int) -> dict[str, Any]:
    """One batch as a row: docllm's ref, the provider's id and status as last seen, its age on the
    authority clock, its cost at batch prices once its results are applied (null before)."""
    return {
        "ref": batch.ref,
        "batch_id": batch.batch_id,
        "deployment": batch.deployment,
        "state": batch.state.value,
        "provider_status": batch.provider_status,
        "tasks": batch.tasks,
        "age_s": round(max(0, batch.age_ms(now_ms)) / 1000.0, 1),
        "cost_usd": None if batch.cost_usd is None else round(batch.cost_usd, 6),
    }


def batches_json(store: BatchStore, now_ms: int) -> dict[str, Any] | None:
    """``stats --json`` -> "batches", or None when no batch was ever recorded: the batches and
    their tasks per state (every state), the tasks in batches not yet applied or returned, and the
    batches shown (every unfinished one and the newest ``SHOWN_RECENT``), newest first."""
    counts = store.counts()
    if not any(c.batches for c in counts.values()):
        return None
    shown = {b.ref: b for b in store.recent(SHOWN_RECENT)} | {b.ref: b for b in store.unfinished(UNFINISHED_LIMIT)}
    newest = sorted(shown.values(), key=lambda b: (b.created_at, b.ref), reverse=True)
    return {
        "by_state": {s.value: c.batches for s, c in counts.items()},
        "tasks_by_state": {s.value: c.tasks for s, c in counts.items()},
        "tasks_in_unfinished": sum(c.tasks for s, c in counts.items() if not s.terminal),
        "shown": [batch_json(b, now_ms) for b in newest],
    }


def task_batches_json(store: BatchStore, task_id: int) -> list[dict[str, Any]]:
    """The batches holding a task (any attempt), newest first: ``show`` and the task's page."""
    found = (store.get(ref) for ref in store.of_task(task_id))
    return [
        {
            "ref": b.ref,
            "batch_id": b.batch_id,
            "state": b.state.value,
            "attempts": [m.attempt for m in b.members if m.task_id == task_id],
        }
        for b in found
        if b is not None
    ]


def batch_tables(stats: dict[str, Any]) -> list[Table]:
    """``docllm stats``: the counts per state and the batches shown; nothing without batches.
    Refs are cut to ``SHORT_REF`` characters to fit 80 columns (``--json`` has them whole, as
    ``show`` and the dashboard)."""
    batches = stats.get("batches")
    if not batches:
        return []
    counts = Table(title=f"batches ({batches['tasks_in_unfinished']} tasks unfinished)")
    for heading in ("state", "batches", "tasks"):
        counts.add_column(heading, justify="left" if heading == "state" else "right")
    for state, n in batches["by_state"].items():
        counts.add_row(state, str(n), str(batches["tasks_by_state"][state]))
    listed = Table(title="batches shown (unfinished and newest)")
    for key, heading in TABLE_COLUMNS.items():  # only the provider's batch id (long) is folded
        listed.add_column(heading, overflow="fold", no_wrap=key != "batch_id")
    for row in batches["shown"]:  # ids and statuses are the provider's data, not markup
        cells = {**row, "ref": row["ref"][:SHORT_REF]}
        listed.add_row(*("-" if cells[c] is None else escape(str(cells[c])) for c in TABLE_COLUMNS))
    return [counts, listed]


def task_batches_lines(batches: list[dict[str, Any]]) -> list[str]:
    """``docllm show``'s lines of the batches holding the task, newest first (none: no line)."""
    return [
        f"batch {escape(b['ref'])} {escape(b['batch_id'] or '(no batch id yet)')} {b['state']}, "
        f"attempt {', '.join(map(str, b['attempts']))}"
        for b in batches
    ]
