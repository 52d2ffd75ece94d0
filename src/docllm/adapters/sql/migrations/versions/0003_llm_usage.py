"""Each task's LLM usage: calls, tokens, seconds, model and cost, summed over its attempts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03

Six nullable columns, added to the table as it is (no row is rewritten): existing producers'
INSERTs and the original workers' UPDATEs never name them and keep working (docs/UPGRADING.md).
Idempotent, like 0001: a column that is already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"


def _columns() -> list[sa.Column]:
    # Written out rather than imported from the model: a migration is a snapshot of its day.
    return [
        sa.Column("llm_calls", sa.Integer, nullable=True),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=True),
        sa.Column("completion_tokens", sa.BigInteger, nullable=True),
        sa.Column("llm_seconds", sa.Double, nullable=True),
        sa.Column("llm_model", sa.String(255), nullable=True),
        sa.Column("cost_usd", sa.Double, nullable=True),
    ]


def upgrade() -> None:
    # Nullable columns at the end of the table: MariaDB 10.3+ and MySQL 8.0.12+ add them in place
    # ("instant"), without copying the table; SQLite adds them without touching the rows.
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    for column in _columns():
        if column.name not in present:
            op.add_column(TABLE, column)


def downgrade() -> None:
    for column in reversed(_columns()):
        op.drop_column(TABLE, column.name)
