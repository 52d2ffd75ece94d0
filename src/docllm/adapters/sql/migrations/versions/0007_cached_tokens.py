"""Each task's cached prompt tokens: the part of ``prompt_tokens`` its provider served from the
prompt cache, priced apart (issue 27, ``DOCLLM_LLM_PRICES``' CACHED_INPUT).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05

One nullable column beside the other usage columns of 0003: NULL reads as 0 cached tokens, as
every row before this one had. Idempotent, like 0005: a column already there is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
COLUMN = "cached_tokens"


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns(TABLE)}
    if COLUMN not in present:
        op.add_column(TABLE, sa.Column(COLUMN, sa.BigInteger, nullable=True))


def downgrade() -> None:
    op.drop_column(TABLE, COLUMN)
