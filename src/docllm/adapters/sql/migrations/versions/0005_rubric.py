"""Each task's rubric: the name of the checks its review follows (issue 25, docs/RUBRICS.md).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05

One nullable column, added to the table as it is: existing producers' INSERTs never name it, and
NULL is a review without a rubric, as every row before this one was.
Idempotent, like 0001: a column that is already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
COLUMN = "rubric"


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    if COLUMN not in present:
        op.add_column(TABLE, sa.Column(COLUMN, sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column(TABLE, COLUMN)
