"""Findings a person judged (issue 46): the table ``finding_marks``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07

One mark per (tenant, document name, fingerprint of the finding): its reason (false-alarm, accepted,
wont-fix), a note, who and when, and the finding as it was shown. A table of its own beside
``task_doc_llm``, which is left as it is: producers never see it. Idempotent, like 0009: a table
already there is left alone.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from docllm.adapters.sql.schema import TaskId
from docllm.adapters.sql.timestamps import UtcDateTime, utcnow

revision = "0012"
# Written beside 0011 (the review cache, branch `cache`) and chained on it at the merge: one head.
down_revision = "0011"
branch_labels = None
depends_on = None

TABLE = "finding_marks"
OPTIONS: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _exact(length: int) -> Any:
    """Keys compared byte for byte on MySQL (utf8mb4_bin): its default collation ignores case and
    accents, which would make two tenants, or README.md and readme.md, one key."""
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def _columns() -> list[sa.Column]:
    # Written out rather than imported from the model: a migration is a snapshot of its day.
    return [
        sa.Column("tenant", _exact(64), primary_key=True),
        sa.Column("document", _exact(255), primary_key=True),
        sa.Column("fingerprint", _exact(64), primary_key=True),
        sa.Column("quote_print", sa.String(64), nullable=True),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("rule", sa.String(255), nullable=True),
        sa.Column("category", sa.String(32), nullable=True),
        sa.Column("severity", sa.String(16), nullable=True),
        sa.Column("quote", sa.Text, nullable=True),
        sa.Column("heading", sa.Text, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("task_id", TaskId, nullable=True),
        sa.Column("number", sa.Integer, nullable=True),
        sa.Column("marked_by", sa.String(255), nullable=True),
        sa.Column("marked_at", UtcDateTime(), nullable=False, server_default=utcnow()),
    ]


def upgrade() -> None:
    if not sa.inspect(op.get_bind()).has_table(TABLE):
        op.create_table(TABLE, *_columns(), **OPTIONS)


def downgrade() -> None:
    op.drop_table(TABLE)
