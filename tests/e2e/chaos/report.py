"""The chaos summary as Markdown (for the test's output, ``scripts/chaos`` and docs/RELIABILITY.md)."""

from __future__ import annotations

from typing import Any


def markdown(summary: dict[str, Any], command: str = "") -> str:
    s, f = summary, summary["faults"]
    lines = [
        f"- command: `{command}`" if command else "",
        f"- seed {s['seed']}; {s['settings']['workers']} workers x {s['settings']['concurrency']} slots, "
        f"{s['settings']['reapers']} reapers; lease {s['settings']['lease_s']} s, reaper every "
        f"{s['settings']['reaper_interval_s']} s, reconcile every {s['settings']['reconcile_interval_s']} s "
        f"(grace {s['settings']['reconcile_grace_s']} s), max attempts {s['settings']['max_attempts']}",
        f"- LLM test server: {s['settings']['llm_latency_ms'][0]}-{s['settings']['llm_latency_ms'][1]} ms, "
        f"{s['settings']['rate_429']:.0%} 429, {s['settings']['rate_500']:.0%} 500",
        f"- clocks: workers {s['skews']['workers']}, reapers {s['skews']['reapers']}, submit {s['skews']['submit']} "
        "(libfaketime, monotonic clock not faked); MariaDB in +08:00",
        f"- tasks: {s['tasks_submitted']} submitted, {s['rows']} rows at the end: {s['by_status']}; "
        f"{len(s['deleted_rows'])} rows deleted in flight; {s['dead_letters']} dead letters",
        f"- time: set-up {s['setup_s']} s, faults {s['fault_phase_s']} s, settled {s['settle_s']} s after the "
        f"last fault (bound {s['settle_bound_s']} s, {s['open_tasks_when_faults_stopped']} tasks open then), "
        f"total {s['total_s']} s; {s['tasks_per_s']} tasks/s",
        f"- kills: {s['kills']} SIGKILL ({f['worker_kills']} workers, {f['reaper_kills']} reapers), "
        f"{f['worker_sigterms']} SIGTERM (slowest stop {s['sigterm_stop_s_max']} s), {f['worker_pauses']} SIGSTOP "
        "past the lease then SIGCONT",
        f"- restarts: {f['worker_restarts']} workers, {f['reaper_restarts']} reapers, Redis {f['redis_restarts']} "
        f"restarts + {f['redis_crashes']} SIGKILLs + {f['redis_flushes']} FLUSHALL, MariaDB {f['mariadb_restarts']} "
        f"restarts + {f['mariadb_crashes']} SIGKILLs",
        (
            f"- Sentinel set (primary, replica, 3 sentinels, down-after 1 s): {f['redis_failovers']} failovers "
            f"(primary SIGKILLed, replica promoted after {s['failover_s']} s, old primary back as its replica); "
            "the Redis faults above hit the current primary; workers reach Redis directly (no Redis link); "
            f"dead letters lost with a failover: {s.get('dead_letters_lost', 0)}"
            if s["settings"].get("topology") == "sentinel"
            else ""
        ),
        f"- network (own links through the fault proxy): {f['net_latency_bursts']} latency bursts, "
        f"{f['net_blackholes']} half-open links, {f['net_resets']} resets, {f['net_dropped_replies']} replies "
        "of a commit or script dropped after it ran",
        f"- max time in processing: {s['max_lease_age_s']} s (Redis lease age), {s['max_row_processing_s']} s "
        f"(row `processing`); largest ready backlog {s['max_ready_backlog']}",
        f"- recoveries (log events): {s['recoveries']}",
        f"- commits per task (DB trigger): at most {s['commits_max_per_task']}",
        f"- error log lines: {s['error_log_lines']} {s['error_log_messages'] or ''}",
        f"- problems: {s['problems'] or 'none'}",
    ]
    return "\n".join(line for line in lines if line)
