"""The original deployment's ``result TEXT`` column holds docllm's reports too.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

The original note's table keeps ``result`` as ``TEXT`` (64 KB on MySQL); 0001 adopts it as it is,
and a long report would then fail its commit ("Data too long"). On MySQL/MariaDB a ``result``
narrower than LONGTEXT becomes LONGTEXT with the character set and collation it has, so every
stored value keeps its bytes (docs/UPGRADING.md). Nothing else of the table changes: its ENUM
status, its local-time DATETIMEs and its rows stay as the old code wrote them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLE = "task_doc_llm"
NARROW = ("tinytext", "text", "mediumtext", "varchar", "char")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name not in ("mysql", "mariadb"):
        return  # SQLite's TEXT has no length limit
    found = bind.execute(
        sa.text(
            "SELECT DATA_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, IS_NULLABLE FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :table AND COLUMN_NAME = 'result'"
        ),
        {"table": TABLE},
    ).first()
    if found is None or found.DATA_TYPE.lower() not in NARROW:
        return
    # Names from information_schema, not user input; checked to be plain identifiers all the same.
    charset, collation = found.CHARACTER_SET_NAME, found.COLLATION_NAME
    if not (charset.replace("_", "").isalnum() and collation.replace("_", "").isalnum()):
        raise RuntimeError(f"unexpected character set {charset!r} or collation {collation!r} of result")
    null = "NULL" if found.IS_NULLABLE == "YES" else "NOT NULL"
    op.execute(f"ALTER TABLE {TABLE} MODIFY COLUMN result LONGTEXT CHARACTER SET {charset} COLLATE {collation} {null}")


def downgrade() -> None:
    pass  # a wider column is harmless to the old code; narrowing it could cut reports short
