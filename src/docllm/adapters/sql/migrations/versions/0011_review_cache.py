"""The review cache (issue 46): the table ``review_cache``, ``task_doc_llm.fresh`` and ``llm_batch_tasks.asked``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07

A chunk's answer is kept under the digest of what decided it (domain/review/cache.py), written in
the transaction of the commit it came from; every worker reads it. ``fresh`` marks a task submitted
with ``--fresh`` (reviewed without the cache); NULL, for every row written before or by a producer
that does not know it, is "no". ``asked`` is the digest of what a batch member's lines asked: its
answers are cached only when a realtime review would ask the same (NULL: a batch recorded before,
whose answers are not cached). Idempotent, like 0009: what is already there is left alone.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.mysql import LONGTEXT

from docllm.adapters.sql.schema import TaskId

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TASKS, CACHE, MEMBERS = "task_doc_llm", "review_cache", "llm_batch_tasks"
COLUMN, AGE_INDEX = "fresh", "ix_review_cache_created_ms"
OPTIONS: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
LongText = sa.Text().with_variant(LONGTEXT(), "mysql", "mariadb")


def _cache() -> list[sa.Column]:
    # Written out rather than imported from the model: a migration is a snapshot of its day.
    return [
        sa.Column("cache_key", sa.String(64), primary_key=True),
        sa.Column("answer", LongText, nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("deployment", sa.String(128), nullable=True),
        sa.Column("task_id", TaskId, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("completion_tokens", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    ]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if COLUMN not in {c["name"] for c in inspector.get_columns(TASKS)}:
        op.add_column(TASKS, sa.Column(COLUMN, sa.Boolean, nullable=True))
    if "asked" not in {c["name"] for c in inspector.get_columns(MEMBERS)}:
        op.add_column(MEMBERS, sa.Column("asked", sa.String(64), nullable=True))
    if not inspector.has_table(CACHE):
        op.create_table(CACHE, *_cache(), **OPTIONS)
    if AGE_INDEX not in {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(CACHE)}:
        op.create_index(AGE_INDEX, CACHE, ["created_ms"])


def downgrade() -> None:
    op.drop_column(MEMBERS, "asked")
    op.drop_table(CACHE)
    op.drop_column(TASKS, COLUMN)
