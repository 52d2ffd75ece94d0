"""Provider batches of bulk tasks (issue 28): ``llm_batches`` and its members, ``llm_batch_tasks``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06

Two new tables beside ``task_doc_llm``, which is left as it is: producers never see them. A batch
row is written before the provider is asked anything (domain/batches/model.py), so a batch the provider
holds is always found again. Idempotent, like 0001: a table or index already there is left alone.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from docllm.adapters.sql.schema import TaskId
from docllm.adapters.sql.timestamps import UtcDateTime

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BATCHES, MEMBERS = "llm_batches", "llm_batch_tasks"
STATE_INDEX, TASK_INDEX = "ix_llm_batches_state_created_at", "ix_llm_batch_tasks_task_id"
OPTIONS: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _batches() -> list[sa.Column]:
    # Written out rather than imported from the model: a migration is a snapshot of its day.
    return [
        sa.Column("ref", sa.String(32), primary_key=True),
        sa.Column("deployment", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("batch_id", sa.String(128), nullable=True, unique=True),
        sa.Column("input_file_id", sa.String(128), nullable=True),
        sa.Column("output_file_id", sa.String(128), nullable=True),
        sa.Column("error_file_id", sa.String(128), nullable=True),
        sa.Column("provider_status", sa.String(32), nullable=True),
        sa.Column("tasks", sa.Integer, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("cost_usd", sa.Double, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    ]


def _members() -> list[sa.Column]:
    return [
        sa.Column("ref", sa.String(32), sa.ForeignKey(f"{BATCHES}.ref"), primary_key=True),
        sa.Column("task_id", TaskId, primary_key=True, autoincrement=False),
        sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
    ]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(BATCHES):
        op.create_table(BATCHES, *_batches(), **OPTIONS)
    if STATE_INDEX not in {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(BATCHES)}:
        op.create_index(STATE_INDEX, BATCHES, ["state", "created_at"])
    if not inspector.has_table(MEMBERS):
        op.create_table(MEMBERS, *_members(), **OPTIONS)
    if TASK_INDEX not in {i["name"] for i in sa.inspect(op.get_bind()).get_indexes(MEMBERS)}:
        op.create_index(TASK_INDEX, MEMBERS, ["task_id"])


def downgrade() -> None:
    op.drop_table(MEMBERS)
    op.drop_table(BATCHES)
