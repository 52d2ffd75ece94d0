"""Grouped store writes under SIGKILL, on real redis-server and MariaDB (issue 31).

A worker with many slots and a linger long enough for groups to form commits its attempts in
groups; it is killed while they are being written. A group is one transaction, so each of its
rows is either committed or still ``processing`` under its lease; a second worker and the reaper
finish the rest. Every row ends ``success`` with exactly one commit (the audit trigger counts
them, independently of the product), none is left ``processing``, and the reconciler (which
would rescue a row left processing without a lease) never had to act.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, commits, install_commit_audit, wait_until, write_documents

pytestmark = pytest.mark.e2e

TASKS = 150


def test_sigkill_during_group_commits_leaves_every_row_committed_once_or_settled(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    install_commit_audit(probe)
    write_documents(tmp_path / "docs", TASKS, "grp")
    created = harness.submit(sorted((tmp_path / "docs").iterdir()))
    ids = {c["task_id"] for c in created}
    assert len(ids) == TASKS
    busy = {
        "DOCLLM_CONCURRENCY": "64",
        "DOCLLM_OFFLINE_LATENCY_SECONDS": "0.05",
        "DOCLLM_STORE_LINGER_MS": "20",
        "DOCLLM_STORE_CONNECTIONS": "4",
    }
    victim = harness.worker("w1", busy)
    done = lambda: sum(1 for r in probe.rows(False).values() if r["status"] == "success")  # noqa: E731
    wait_until(lambda: done() >= 20, 60, "the first groups to commit", on_timeout=harness.dump)
    victim.kill()  # mid-stream: groups of starts and commits are in flight
    left = TASKS - done()
    assert left > 0, "the worker finished everything before it was killed: nothing was tested"

    harness.worker("w2", {**busy, "DOCLLM_STORE_LINGER_MS": "5"})
    wait_until(lambda: done() == TASKS, 90, "every task to succeed", on_timeout=harness.dump)

    rows = probe.rows(False)
    assert {r["status"] for r in rows.values()} == {"success"}
    audit = commits(probe)
    assert set(audit) == ids
    twice = {task_id: attempts for task_id, attempts in audit.items() if len(attempts) != 1}
    assert twice == {}, f"committed more than once: {twice}"
    assert all(audit[i] == [rows[i]["attempt"]] for i in ids)  # by the attempt that holds the row
    # Settled by the leases and the reaper, never by the reconciler's last resort: no row was left
    # processing without a lease (a group half written, its Redis side acked).
    assert harness.events("reconciled") == []
    stats = harness.stats()
    assert stats["tasks"] == {"pending": 0, "processing": 0, "success": TASKS, "failed": 0}
    assert stats["queue"] == {"ready": 0, "processing": 0, "delayed": 0, "dead": 0}
