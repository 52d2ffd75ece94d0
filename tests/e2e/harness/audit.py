"""The fencing audit: every commit counted by a database trigger, apart from the product's logs."""

from __future__ import annotations

import sqlalchemy as sa

from tests.e2e.harness.probe import Probe

AUDIT_TABLE = "e2e_commit_audit"


def install_commit_audit(probe: Probe) -> None:
    """A trigger that writes down every UPDATE that leaves a row ``success``.

    The product's commit is the only write that may do that (once per task, from the attempt that
    holds the fencing token), so the audit counts commits independently of the product's own logs.
    """
    with probe.engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE IF NOT EXISTS {AUDIT_TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                "task_id BIGINT NOT NULL, attempt INT NOT NULL, lease_token VARCHAR(64), "
                "at DATETIME(6) NOT NULL)"
            )
        )
        conn.execute(sa.text("DROP TRIGGER IF EXISTS e2e_commit_audit_trg"))
        conn.execute(
            sa.text(
                "CREATE TRIGGER e2e_commit_audit_trg AFTER UPDATE ON task_doc_llm FOR EACH ROW "
                f"BEGIN IF NEW.status = 'success' THEN INSERT INTO {AUDIT_TABLE} (task_id, attempt, lease_token, at) "
                "VALUES (NEW.task_id, NEW.attempt, NEW.lease_token, NOW(6)); END IF; END"
            )
        )


def commits(probe: Probe) -> dict[int, list[int]]:
    """task_id -> the attempt numbers of its commits, in order."""
    with probe.engine.connect() as conn:
        found = conn.execute(sa.text(f"SELECT task_id, attempt FROM {AUDIT_TABLE} ORDER BY id")).all()  # noqa: S608
    out: dict[int, list[int]] = {}
    for task_id, attempt in found:
        out.setdefault(int(task_id), []).append(int(attempt))
    return out
