"""The checks of a chaos run, once everything settled (the module docstring of ``tests.e2e.chaos`` lists them)."""

from __future__ import annotations

import collections
from typing import Any

from tests.e2e.chaos.bad_input import MALFORMED, UNKNOWN_TASK_ID
from tests.e2e.chaos.faults import Faults
from tests.e2e.chaos.settings import ChaosSettings
from tests.e2e.chaos.workload import Workload
from tests.e2e.harness import Harness, Probe, commits, report_matches

RECOVERY_EVENTS = (
    "reclaimed",
    "requeued",
    "reconciled",
    "released",
    "stale_attempt",
    "lease_lost",
    "duplicate_ignored",
    "stale_lease_dropped",
    "retried",
    "dead_lettered",
)


def settled(probe: Probe) -> bool:
    """No task open, nothing left in Redis but dead letters."""
    counts = probe.counts()
    sizes = probe.queue_sizes()
    return counts["pending"] == counts["processing"] == 0 and all(
        sizes[k] == 0 for k in ("ready", "processing", "delayed", "leases", "lease_index")
    )


def check(
    settings: ChaosSettings, harness: Harness, probe: Probe, workload: Workload, faults: Faults, problems: list[str]
) -> dict[str, Any]:
    """Every check of the end state; a failed one appended to ``problems``. Returns the figures of the summary."""
    _check_nothing_open(harness, probe, problems)
    rows = probe.rows(with_result=False)
    by_status = _check_rows(harness, workload, faults, rows, problems)
    audit, events = _check_one_commit_per_task(harness, probe, rows, problems)
    slowest = max(faults.sigterm_seconds, default=0.0)
    if slowest > settings.stop_limit_s:
        problems.append(
            f"a SIGTERMed worker took {slowest:.1f}s to stop (grace {settings.shutdown_grace_s:g}s, "
            f"limit {settings.stop_limit_s:g}s)"
        )
    dead, lost = _check_dead_letters(harness, workload, faults, problems)
    all_errors = _check_error_logs(harness, problems)
    recoveries = collections.Counter(e["event"] for e in events if e["event"] in RECOVERY_EVENTS)
    return {
        "rows": len(rows),
        "by_status": dict(by_status),
        "dead_letters": len(dead),
        "dead_letters_lost": len(lost) if faults.sentinel else 0,
        "commits_max_per_task": max((len(v) for v in audit.values()), default=0),
        "recoveries": dict(sorted(recoveries.items())),
        "error_log_lines": len(all_errors),
        "error_log_messages": sorted(
            collections.Counter(f"{r.get('logger')}: {r.get('message')}"[:160] for r in all_errors).items(),
            key=lambda kv: -kv[1],
        )[:8],
    }


def _check_nothing_open(h: Harness, p: Probe, problems: list[str]) -> None:
    """No task pending or processing, nothing queued and no lease left in Redis."""
    stats = h.stats()
    if stats["tasks"]["pending"] or stats["tasks"]["processing"]:
        problems.append(f"docllm stats: tasks {stats['tasks']}")
    if any(stats["queue"][k] for k in ("ready", "processing", "delayed")):
        problems.append(f"docllm stats: queue {stats['queue']}")
    sizes = p.queue_sizes()
    if sizes["leases"] or sizes["lease_index"] or sizes["processing_ts"]:
        problems.append(f"leases left in Redis: {sizes}")


def _check_rows(
    h: Harness, workload: Workload, faults: Faults, rows: dict[int, Any], problems: list[str]
) -> collections.Counter[str]:
    """Every submitted task has its row (but those deleted on purpose), and each ended as intended
    with a report about its own document. Returns the rows per status."""
    missing = sorted(set(workload.submitted) - set(rows) - faults.deleted)
    if missing:
        problems.append(f"{len(missing)} submitted tasks have no row: {missing[:10]}")
    if faults.deleted & set(rows):
        problems.append(f"deleted rows came back: {sorted(faults.deleted & set(rows))}")
    statuses = h.status(*sorted(rows)) if rows else []
    intended_failures = {workload.big_task} if workload.big_task else set()
    for task in statuses:
        tid, name = task["task_id"], task["task_name"]
        if tid in intended_failures:
            if task["status"] != "failed" or "over the limit" not in (task["error"] or ""):
                problems.append(f"the 10 MB document (task {tid}) is {task['status']}: {task['error']}")
            continue
        if task["status"] != "success":
            problems.append(f"task {tid} ({name}) is {task['status']}: {task['error']}")
        elif name not in workload.headings or not report_matches(task["result"], workload.headings[name]):
            problems.append(f"task {tid} ({name}): the stored report is not about its document")
    return collections.Counter(t["status"] for t in statuses)


def _check_one_commit_per_task(
    h: Harness, p: Probe, rows: dict[int, Any], problems: list[str]
) -> tuple[dict[int, list[int]], list[dict[str, Any]]]:
    """Fencing: one commit per successful task, by the attempt that holds the row's token, in the
    database's audit and in the logs. Returns the audit and the log events."""
    audit = commits(p)
    for tid, row in rows.items():
        made = audit.get(tid, [])
        expected = [row["attempt"]] if row["status"] == "success" else []
        if made != expected:
            problems.append(
                f"task {tid}: commits by attempts {made}, the row is {row['status']} at attempt {row['attempt']}"
            )
    stray = sorted(set(audit) - set(rows))
    if stray:
        problems.append(f"commits for tasks without a row: {stray[:10]}")
    events = h.events()
    succeeded = collections.Counter(e["task_id"] for e in events if e["event"] == "succeeded")
    twice = {tid: n for tid, n in succeeded.items() if n > 1}
    if twice:
        problems.append(f"tasks with more than one `succeeded` event in the logs: {twice}")
    for e in events:
        if e["event"] == "succeeded" and e["task_id"] in rows and e["attempt"] != rows[e["task_id"]]["attempt"]:
            problems.append(
                f"task {e['task_id']}: `succeeded` by attempt {e['attempt']}, the row holds "
                f"attempt {rows[e['task_id']]['attempt']}"
            )
    return audit, events


def _check_dead_letters(
    h: Harness, workload: Workload, faults: Faults, problems: list[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Bad input: in the dead-letter list (or failed) with a reason. Returns the dead letters and
    those a Sentinel failover lost (counted there, not failed)."""
    dead = h.cli_json("dead", "list", "--limit", "100000")
    reasons = collections.defaultdict(list)
    for d in dead:
        if not d["reason"]:
            problems.append(f"a dead letter without a reason: {d['payload'][:80]!r}")
        reasons[d["task_id"]].append(d["reason"])
    payloads = collections.Counter(d["payload"] for d in dead)
    # On a Sentinel set a failover may promote a replica a few seconds behind (Sentinel promotes one
    # whose link broke less than 10 x down-after ago), and a dead letter pushed in those seconds is
    # gone with them; the tasks are recovered (checked above), a dead letter is not. There each bad
    # input must be in the list at most once, and the missing ones are counted, not failed.
    lost = []
    for raw in MALFORMED:
        if payloads[raw] != 1:
            lost.append(f"malformed payload {raw[:50]!r} is {payloads[raw]} times in the dead-letter list")
    for tid in sorted(faults.deleted):
        if not any("deleted" in r or "no row" in r for r in reasons.get(tid, [])):
            lost.append(f"task {tid} (row deleted in flight) is not dead-lettered: {reasons.get(tid)}")
    if workload.big_task and not any("over the limit" in r for r in reasons.get(workload.big_task, [])):
        lost.append(f"the 10 MB document's payload is not dead-lettered: {reasons.get(workload.big_task)}")
    if not faults.sentinel:
        problems.extend(lost)
    elif any(payloads[raw] > 1 for raw in MALFORMED):
        problems.append(f"a malformed payload is more than once in the dead-letter list: {lost}")
    expected_dead = {None, UNKNOWN_TASK_ID, 1, workload.big_task, *faults.deleted}  # 1: the oversized payload
    unexpected = {tid: r for tid, r in reasons.items() if tid not in expected_dead}
    if unexpected:
        problems.append(f"unexpected dead letters: {dict(list(unexpected.items())[:10])}")
    return dead, lost


def _check_error_logs(h: Harness, problems: list[str]) -> list[dict[str, Any]]:
    """Returns every error line, docllm's and the libraries'."""
    # An error docllm logs is a bug (or a broken harness): none are allowed. Libraries' own error
    # lines (SQLAlchemy's pool failing to roll back a connection MariaDB dropped) are counted only.
    all_errors = [r for r in h.log_lines() if r.get("level") in ("error", "critical")]
    errors = [r for r in all_errors if str(r.get("logger", "")).startswith("docllm")]
    if errors:
        first = errors[0]
        problems.append(
            f"{len(errors)} error log lines, the first from {first['_proc']}: {first.get('message')} "
            f"{(first.get('exc') or '')[-600:]}"
        )
    return all_errors
