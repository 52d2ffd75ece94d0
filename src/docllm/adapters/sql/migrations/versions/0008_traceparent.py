"""Each task's trace context: the W3C traceparent its submit started (issue 29, docs/DEPLOY.md, Tracing).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05

One nullable column, added to the table as it is: existing producers' INSERTs never name it, and
NULL is a task nobody traced, as every row before this one. The reconciler's re-queue reads it, so
a task Redis lost continues its trace.
Idempotent, like 0005: a column that is already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
COLUMN = "traceparent"


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    if COLUMN not in present:
        op.add_column(TABLE, sa.Column(COLUMN, sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column(TABLE, COLUMN)
