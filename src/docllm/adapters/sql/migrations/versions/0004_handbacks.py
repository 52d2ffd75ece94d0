"""Each task's counted hand-backs: attempts the LLM boundary handed back uncharged (I12).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04

A hand-back blamed on the provider, this host or our limits while the provider serves others
uses no attempt, so ``retry_count`` cannot bound it: this column does (``DOCLLM_MAX_HANDBACKS``).
One column with a default, added to the table as it is: existing producers' INSERTs never name it.
Idempotent, like 0001: a column that is already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
COLUMN = "handbacks"


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    if COLUMN not in present:
        op.add_column(TABLE, sa.Column(COLUMN, sa.Integer, nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    op.drop_column(TABLE, COLUMN)
