"""Each task's lane and tenant (issue 26): ``priority`` (NULL: lane ``default``) and ``tenant``
(NULL: no tenant).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05

Two nullable columns, added to the table as it is: existing producers' INSERTs never name them,
and NULL is the default lane without a tenant, as every row before this one was.
Idempotent, like 0005: a column that is already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
COLUMNS = {"priority": 16, "tenant": 64}


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    for name, length in COLUMNS.items():
        if name not in present:
            op.add_column(TABLE, sa.Column(name, sa.String(length), nullable=True))


def downgrade() -> None:
    for name in COLUMNS:
        op.drop_column(TABLE, name)
