"""Each task's lane and tenant (issue 26, ARCHITECTURE.md, Lanes).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05

Two nullable columns, added to the table as it is: existing producers' INSERTs never name them;
NULL priority is the default lane and NULL tenant is no tenant, as every row before this one.
The reconciler re-queues a lost task with them, so it returns to its own lane.
Idempotent, like 0001: a column that is already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
COLUMNS = (("priority", 16), ("tenant", 64))


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    for name, width in COLUMNS:
        if name not in present:
            op.add_column(TABLE, sa.Column(name, sa.String(width), nullable=True))


def downgrade() -> None:
    for name, _ in reversed(COLUMNS):
        op.drop_column(TABLE, name)
