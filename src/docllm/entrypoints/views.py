"""How tasks, stats, dead letters, workers and cancels look on the command line: JSON shapes (a
contract) and tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape
from rich.table import Table

from docllm.domain.llm.breaker import BreakerView
from docllm.domain.llm.budget import BudgetView
from docllm.domain.llm.deployments import Deployment
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.cancel import Cancel, CancelResult
from docllm.domain.tasks.model import DeadLetter, QueueStats, Task, TaskStatus
from docllm.domain.tasks.workers import WorkerRecord
from docllm.settings import redact_url


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def task_json(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "task_name": task.task_name,
        "status": task.status.value,
        "attempt": task.attempt,
        "retry_count": task.retry_count,
        "result": task.result,
        "error": task.error,
        "created_at": _iso(task.created_at),
        "finished_at": _iso(task.finished_at),
        "usage": task_usage_json(task),
    }


def stats_json(counts: dict[str, int], queue: QueueStats, now_ms: int) -> dict[str, Any]:
    oldest = None
    if queue.oldest_claimed_at_ms is not None:
        oldest = round(max(0, now_ms - queue.oldest_claimed_at_ms) / 1000.0, 3)
    return {
        "tasks": {s.value: int(counts.get(s.value, 0)) for s in TaskStatus},
        "queue": {"ready": queue.ready, "processing": queue.processing, "delayed": queue.delayed, "dead": queue.dead},
        "oldest_processing_s": oldest,
    }


def usage_json(every: Usage, last_hour: Usage) -> dict[str, Any]:
    """The ``llm.usage`` object of ``stats --json``: flat, all time and over the last hour."""
    out: dict[str, Any] = {}
    for suffix, usage in (("", every), ("_last_hour", last_hour)):
        out |= {
            f"calls{suffix}": usage.calls,
            f"prompt_tokens{suffix}": usage.prompt_tokens,
            f"completion_tokens{suffix}": usage.completion_tokens,
            f"cached_tokens{suffix}": usage.cached_tokens,
            f"llm_seconds{suffix}": round(usage.llm_seconds, 3),
            f"cost_usd{suffix}": None if usage.cost_usd is None else round(usage.cost_usd, 6),
        }
    return out


def task_usage_json(task: Task) -> dict[str, Any] | None:
    """A task's LLM usage (for ``status``/``show``); None when no attempt recorded any."""
    u = task.usage
    if u is None:
        return None
    return {
        "llm_calls": u.calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_tokens": u.cached_tokens,
        "llm_seconds": round(u.llm_seconds, 3),
        "llm_model": u.model,
        "cost_usd": None if u.cost_usd is None else round(u.cost_usd, 6),
    }


def breaker_json(view: BreakerView) -> dict[str, Any]:
    """The fleet's LLM breaker as ``docllm stats --json`` shows it under "llm" -> "breaker"."""
    return {
        "state": view.state.value,
        "open_s": round(view.open_seconds_now(), 1),  # 0 while closed
        "open_total_s": round(view.open_seconds_total(), 1),
        "transitions": view.transitions,
        "window_calls": view.calls,
        "window_failures": view.failures,
    }


def deployment_json(
    d: Deployment, view: BreakerView, headroom: dict[str, Any] | None, spent_usd_today: float = 0.0
) -> dict[str, Any]:
    """One LLM deployment as ``stats --json`` shows it under "llm" -> "deployment-NAME": flat, its
    share of the fleet's spend today, its breaker's fields and its rate limits' headroom (``limit_``
    first; none when it sets no limit)."""
    return {
        "model": d.model,
        "base_url": redact_url(d.base_url),
        "order": d.order,
        "weight": d.weight,
        "spend_usd_today": round(spent_usd_today, 6),  # the authority clock's day, as "budget"
        **{f"breaker_{k}": v for k, v in breaker_json(view).items()},
        **{f"limit_{k}": v for k, v in (headroom or {}).items()},
    }


def budget_json(view: BudgetView) -> dict[str, Any]:
    """The fleet's spend budget (I14) as ``stats --json`` shows it under "llm" -> "budget"."""
    return {
        "claims": "stopped: the spend cap is reached" if view.full else "allowed",
        "spent_usd_today": round(view.spent_usd, 6),
        "held_usd": round(view.held_usd, 6),  # reserved by work in flight (the spend ledger, I16)
        "cap_usd_per_day": view.cap_usd,
        "cap_from": view.source,  # setting (DOCLLM_SPEND_CAP_USD_PER_DAY), fleet (docllm budget set) or off
        "day": view.day,  # days since the epoch on the authority clock (UTC): the count's key
    }


def printable(raw: str) -> str:
    """A payload as valid UTF-8 text: bytes that are not UTF-8 (carried as surrogate escapes)
    are shown as \\xNN."""
    return raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def dead_json(letter: DeadLetter) -> dict[str, Any]:
    return {"task_id": letter.task_id, "reason": letter.reason, "payload": printable(letter.raw), "at_ms": letter.at_ms}


def findings_count(task: Task) -> int | None:
    """None when the result is not a report (rows of the original deployment hold any text)."""
    findings = task.result.get("findings") if isinstance(task.result, dict) else None
    return len(findings) if isinstance(findings, list) else None


def tasks_table(tasks: list[Task], title: str = "tasks") -> Table:
    table = Table(title=title)
    for col in ("id", "name", "status", "attempt", "retries", "findings", "error"):
        table.add_column(col, overflow="fold")
    colours = {"success": "green", "failed": "red", "processing": "yellow", "pending": "cyan"}
    for t in tasks:
        found = findings_count(t)
        # Names and errors are data, not markup: "[v2] 文档" must print as it is.
        table.add_row(
            str(t.task_id),
            escape(t.task_name or ""),
            f"[{colours[t.status.value]}]{t.status.value}[/]",
            str(t.attempt),
            str(t.retry_count),
            "" if found is None else str(found),
            escape((t.error or "")[:80]),
        )
    return table


def stats_table(stats: dict[str, Any]) -> Table:
    table = Table(title="docllm stats")
    table.add_column("what")
    table.add_column("count", justify="right")
    for key, value in stats["tasks"].items():
        table.add_row(f"tasks {key}", str(value))
    for key, value in stats["queue"].items():
        table.add_row(f"queue {key}", str(value))
    oldest = stats["oldest_processing_s"]
    table.add_row("oldest processing (s)", "-" if oldest is None else f"{oldest:.1f}")
    for section, values in stats.get("llm", {}).items():  # flat objects: breaker, limits, usage
        for key, value in values.items():
            table.add_row(f"llm {section} {key}", "-" if value is None else escape(str(value)))
    return table


def dead_table(letters: list[DeadLetter]) -> Table:
    table = Table(title="dead letters")
    for col in ("task_id", "reason", "payload"):
        table.add_column(col, overflow="fold")
    for d in letters:
        table.add_row("" if d.task_id is None else str(d.task_id), escape(d.reason), escape(printable(d.raw)[:120]))
    return table


def worker_json(record: WorkerRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "host": record.host,
        "pid": record.pid,
        "version": record.version,
        "slots": record.slots,
        "in_flight": [{"task_id": f.task_id, "attempt": f.attempt, "age_s": f.age_s} for f in record.in_flight],
        "started_at": record.started_at,
        "last_beat": record.last_beat,
    }


def workers_table(records: list[WorkerRecord], now_s: float) -> Table:
    table = Table(title=f"live workers ({len(records)})")
    for col in ("id", "host", "pid", "version", "busy", "in flight (task#attempt age)", "up", "last beat"):
        table.add_column(col, overflow="fold")
    for r in records:
        flights = ", ".join(f"{f.task_id}#{f.attempt} {f.age_s:.0f}s" for f in r.in_flight)
        table.add_row(
            escape(r.id),
            escape(r.host),
            str(r.pid),
            escape(r.version),
            f"{len(r.in_flight)}/{r.slots}",
            flights,
            _ago(now_s - r.started_at),
            _ago(now_s - r.last_beat) + " ago",
        )
    return table


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def cancel_json(cancel: Cancel) -> dict[str, Any]:
    return {
        "task_id": cancel.task_id,
        "result": cancel.result.value,
        "cancelled": cancel.result is CancelResult.cancelled,
        "status": cancel.status,
        "detail": cancel.detail,
    }


def cancel_table(cancels: list[Cancel]) -> Table:
    table = Table(title="cancel")
    for col in ("task_id", "result", "status", "detail"):
        table.add_column(col, overflow="fold")
    colours = {"cancelled": "green", "running": "yellow", "unknown": "red", "finished": "red"}
    for c in cancels:
        result = c.result.value
        table.add_row(str(c.task_id), f"[{colours[result]}]{result}[/]", c.status or "-", escape(c.detail))
    return table
