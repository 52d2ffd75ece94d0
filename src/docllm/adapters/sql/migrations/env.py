"""Alembic environment: runs on the connection ``upgrade_schema`` hands over.

Run by hand (``alembic -x url=...``) it connects to that URL, or to ``DOCLLM_DATABASE_URL``.
"""

from __future__ import annotations

import os

from alembic import context

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.schema import metadata


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ["DOCLLM_DATABASE_URL"]
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()
