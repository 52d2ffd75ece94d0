"""The task_doc_llm table and its (status, updated_at) index.

Revision ID: 0001
Revises:
Create Date: 2024-06-01

A table that an existing producer created before this migration is adopted: the columns and the
index it lacks are added, the rest is left as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from docllm.adapters.sql.schema import JsonText, LongText, TaskId
from docllm.adapters.sql.timestamps import UtcDateTime, utcnow

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
INDEX = "ix_task_doc_llm_status_updated_at"


def _columns() -> list[sa.Column]:
    # Written out rather than imported from the model: a migration is a snapshot of its day.
    return [
        sa.Column("task_id", TaskId, primary_key=True, autoincrement=True),
        sa.Column("task_name", sa.String(255), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, server_default=sa.text("'pending'")),
        sa.Column("attempt", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("retry_count", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("max_attempts", sa.Integer, nullable=True),
        sa.Column("lease_token", sa.String(64), nullable=True),
        sa.Column("document", LongText, nullable=True),
        sa.Column("result", JsonText, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("processing_started_at", UtcDateTime(), nullable=True),
        sa.Column("finished_at", UtcDateTime(), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False, server_default=utcnow()),
        sa.Column("updated_at", UtcDateTime(), nullable=False, server_default=utcnow()),
    ]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(TABLE):
        op.create_table(TABLE, *_columns(), mysql_engine="InnoDB", mysql_charset="utf8mb4")
    else:
        present = {c["name"] for c in inspector.get_columns(TABLE)}
        for column in _columns():
            if column.name not in present:
                op.add_column(TABLE, column)
    if INDEX not in {i["name"] for i in inspector.get_indexes(TABLE)}:
        op.create_index(INDEX, TABLE, ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.drop_table(TABLE)
