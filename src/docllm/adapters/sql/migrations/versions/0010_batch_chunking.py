"""The chunking each provider batch was built with (issue 43): ``llm_batches.max_chunk_chars``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07

A poller splits each member's document again to place the answers of its lines; it must split as
the batcher did, whatever DOCLLM_LLM_MAX_CHUNK_CHARS says when the results come back (a change
while a batch is out committed a 3-chunk task with one chunk's findings and dropped the cost of
the others). One nullable column: NULL, for a batch recorded before this one, is read as the
poller's own setting, as before. Idempotent, like 0007: a column already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLE = "llm_batches"
COLUMN = "max_chunk_chars"


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    if COLUMN not in present:
        op.add_column(TABLE, sa.Column(COLUMN, sa.Integer, nullable=True))


def downgrade() -> None:
    op.drop_column(TABLE, COLUMN)
