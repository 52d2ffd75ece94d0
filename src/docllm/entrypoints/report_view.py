"""``docllm show``: one task and its report, for a person (findings grouped by severity, most
severe first, each with its location, quote and suggestion) or as JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from docllm.domain.llm.usage import Usage
from docllm.domain.marks.model import Mark
from docllm.domain.review.report import SEVERITIES
from docllm.domain.tasks.model import Task
from docllm.entrypoints.batch_view import task_batches_lines
from docllm.entrypoints.views import task_json

COLOURS = {"critical": "bold red", "high": "red", "medium": "yellow", "low": "cyan"}
STATUS_COLOURS = {"success": "green", "failed": "red", "processing": "yellow", "pending": "cyan"}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def show_json(
    task: Task, batches: list[dict[str, Any]] | None = None, marks: dict[int, Mark] | None = None
) -> dict[str, Any]:
    """``batches``: those holding the task (batch_view.task_batches_json); the key is absent
    when none does. ``marks``: the findings a person dismissed, by number (``dismissed``: absent
    when none is)."""
    shown = task_json(task) | {
        "max_attempts": task.max_attempts,
        "processing_started_at": _iso(task.processing_started_at),
        "updated_at": _iso(task.updated_at),
        "rubric": task.rubric,
    }
    dismissed = [{"number": n, **m.shown()} for n, m in sorted((marks or {}).items())]
    return shown | ({"batches": batches} if batches else {}) | ({"dismissed": dismissed} if dismissed else {})


def render_task(
    task: Task,
    default_max_attempts: int,
    batches: list[dict[str, Any]] | None = None,
    marks: dict[int, Mark] | None = None,
) -> RenderableType:
    parts: list[RenderableType] = [_header(task, default_max_attempts, task_batches_lines(batches or []))]
    report = task.result
    if isinstance(report, dict) and isinstance(report.get("findings"), list):
        parts += _report(report, marks or {})
    elif report is not None:  # a row of the original deployment: any text or JSON
        parts.append(Panel(Text(str(report)), title="result (not a docllm report)"))
    elif not task.status.terminal:
        parts.append(Text(f"no report yet: the task is {task.status.value}", style="dim"))
    return Group(*parts)


def _header(task: Task, default_max_attempts: int, batch_lines: list[str]) -> RenderableType:
    status = task.status.value
    lines = [
        f"[bold]task {task.task_id}[/] {escape(task.task_name or '')}",
        f"status [{STATUS_COLOURS[status]}]{status}[/]   attempt {task.attempt}   "
        f"failed attempts {task.retry_count} of {task.budget(default_max_attempts)} allowed",
    ]
    times = [
        ("created", task.created_at),
        ("started", task.processing_started_at),
        ("finished", task.finished_at),
        ("updated", task.updated_at),
    ]
    lines.append("   ".join(f"{name} {_iso(at)}" for name, at in times if at is not None))
    if task.rubric:
        lines.append(f"rubric {escape(task.rubric)}")
    if task.usage is not None:
        lines.append(_usage_line(task.usage))
    lines += batch_lines
    if task.error:
        lines.append(f"[red]error[/] {escape(task.error)}")
    return Panel("\n".join(lines), expand=False)


def _usage_line(u: Usage) -> str:
    """The row's LLM usage over all attempts; cached prompt tokens are priced apart (DOCLLM_LLM_PRICES)."""
    cost = "no price" if u.cost_usd is None else f"${u.cost_usd:.6f}"
    return (
        f"LLM {u.calls} call(s), {u.prompt_tokens} prompt tokens ({u.cached_tokens} cached) + "
        f"{u.completion_tokens} completion, {cost}"
    )


def _report(report: dict[str, Any], marks: dict[int, Mark]) -> list[RenderableType]:
    """Findings numbered by their place in the report (what ``docllm findings dismiss`` takes),
    grouped by severity; those a person dismissed last, apart."""
    usage = report.get("usage") or {}
    numbered = [(n, f) for n, f in enumerate(report["findings"], 1) if isinstance(f, dict)]
    findings = [f for _, f in numbered]
    out: list[RenderableType] = [
        Text.from_markup(
            f"[bold]summary[/] {escape(str(report.get('summary') or '-'))}\n"
            f"[dim]{len(findings)} finding(s); reviewer {escape(str(report.get('reviewer', '?')))}, "
            f"model {escape(str(report.get('model', '?')))}, chunks {report.get('chunks', '?')}, tokens "
            f"{usage.get('prompt_tokens', 0)} in / {usage.get('completion_tokens', 0)} out"
            + (f", rubric {escape(str(report['rubric']))}" if report.get("rubric") else "")
            + f"{_versions(report)}{_served(report)}{_cached(report)}[/]"
        )
    ]
    known = [s for s in reversed(SEVERITIES)]
    others = sorted({str(f.get("severity")) for f in findings} - set(known))
    for severity in known + others:
        group = [(n, f) for n, f in numbered if str(f.get("severity")) == severity and n not in marks]
        if group:
            style = COLOURS.get(severity, "")
            out.append(Text(f"\n{severity.upper()} ({len(group)})", style=style))
            out += [_finding(n, f) for n, f in group]
    gone = [(n, f) for n, f in numbered if n in marks]
    if gone:
        out.append(Text(f"\nDISMISSED ({len(gone)}, not counted)", style="dim"))
        out += [_finding(n, f, marks[n]) for n, f in gone]
    return out


def _versions(report: dict[str, Any]) -> str:
    """The versions that made the report, as ``, prompt v1, schema v1``: those it records (older
    reports record none; a reviewer without a prompt records None). A rubric shows as NAME@VERSION."""
    named = [(what, report.get(f"{what}_version")) for what in ("prompt", "schema")]
    return "".join(f", {what} v{escape(str(v))}" for what, v in named if v is not None)


def _served(report: dict[str, Any]) -> str:
    """Which LLM deployment served each chunk, as ``, served by east (chunks 1-2), west (chunk 3)``;
    nothing for a report that records none (one deployment, or written before deployments)."""
    names = report.get("deployments")
    if not isinstance(names, list) or not names:
        return ""
    runs: list[tuple[str, int, int]] = []  # (name, first chunk, last chunk)
    for chunk, name in enumerate(names, 1):
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1], chunk)
        else:
            runs.append((str(name), chunk, chunk))
    shown = (f"{escape(n)} (chunk {a})" if a == b else f"{escape(n)} (chunks {a}-{b})" for n, a, b in runs)
    return ", served by " + ", ".join(shown)


def _cached(report: dict[str, Any]) -> str:
    """The chunks the review cache served (issue 46), as ``, from the cache: chunks 1-2, 4 (task 17)``;
    nothing when none was."""
    served = report.get("cached")
    if not isinstance(served, list) or not served:
        return ""
    by_task: dict[str, list[str]] = {}
    for item in served:
        if isinstance(item, dict):
            by_task.setdefault(str(item.get("task_id")), []).append(str(item.get("chunk")))
    parts = (f"{'chunk' if len(c) == 1 else 'chunks'} {', '.join(c)} (task {escape(t)})" for t, c in by_task.items())
    return ", from the cache: " + "; ".join(parts)


def _finding(number: int, f: dict[str, Any], mark: Mark | None = None) -> RenderableType:
    text = Text()
    text.append(f"{number:>3}. ")
    if mark is not None:
        text.append(f"[{f.get('severity', '?')}, dismissed: {mark.reason}] ", style="dim")
    text.append(f"[{f.get('category', 'other')}] ", style="bold")
    text.append(_where(f.get("location")), style="dim")
    if f.get("check"):  # the rubric check that produced it
        text.append(f"  {f['check']}", style="dim")
    text.append(f"\n     {f.get('message', '')}")
    if f.get("quote"):
        text.append(f'\n     "{f["quote"]}"', style="italic")
    if f.get("suggestion"):
        text.append(f"\n     -> {f['suggestion']}", style="green")
    if mark is not None:
        text.append(
            f"\n     dismissed by {mark.marked_by or '?'}" + (f": {mark.note}" if mark.note else ""), style="dim"
        )
    return text


def _where(loc: Any) -> str:
    if not isinstance(loc, dict):
        return "(no location)"
    heading, start, end = loc.get("heading") or "", loc.get("line_start"), loc.get("line_end")
    lines = "" if start is None else (f"line {start}" if end in (None, start) else f"lines {start}-{end}")
    return " · ".join(p for p in (heading, lines) if p) or "(whole document)"
