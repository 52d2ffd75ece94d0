"""The ``task_doc_llm`` table (the original note's ``TaskDocLLM``), as SQLAlchemy Core.

Existing producers insert only ``task_name``, ``status='pending'`` and maybe ``document``: the
server defaults below make such a row valid, its timestamps in the database's UTC time.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.mysql import LONGTEXT, VARCHAR
from sqlalchemy.types import TypeDecorator

from docllm.adapters.sql.timestamps import UtcDateTime, utcnow

# MySQL's TEXT holds 64 KB; documents of 10 MB and more need LONGTEXT (4 GB).
LongText = Text().with_variant(LONGTEXT(), "mysql", "mariadb")
# SQLite autoincrements only an INTEGER PRIMARY KEY (the rowid).
TaskId = BigInteger().with_variant(Integer(), "sqlite")


class JsonText(TypeDecorator):
    """A JSON document kept as text: portable, and readable by producers that predate JSON columns.

    The original deployment wrote its own results here, not always JSON: such a value is read as
    the text it is, so that every command can show an old row (ARCHITECTURE.md, Switching over).
    """

    impl = LongText
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else json.dumps(value, ensure_ascii=False)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        try:
            return json.loads(value)
        except ValueError:
            return value


def usage_columns() -> list[Column]:
    """The LLM usage of the task, summed over its attempts (migration 0003); NULL until one is written."""
    return [
        Column("llm_calls", Integer, nullable=True),
        Column("prompt_tokens", BigInteger, nullable=True),
        Column("completion_tokens", BigInteger, nullable=True),
        Column("llm_seconds", Double, nullable=True),
        Column("llm_model", String(255), nullable=True),
        Column("cost_usd", Double, nullable=True),  # NULL while no model of its calls had a price
        Column("cached_tokens", BigInteger, nullable=True),  # of prompt_tokens, from the prompt cache (0007)
    ]


USAGE_COLUMNS = tuple(c.name for c in usage_columns())


def timestamp(name: str, *, defaulted: bool = False) -> Column:
    """A UTC timestamp; ``defaulted`` ones are filled by the database on insert."""
    if defaulted:
        return Column(name, UtcDateTime(), nullable=False, server_default=utcnow())
    return Column(name, UtcDateTime(), nullable=True)


TABLE_NAME = "task_doc_llm"
STATUS_INDEX = "ix_task_doc_llm_status_updated_at"
MYSQL_TABLE_OPTIONS: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}

metadata = MetaData()
task_doc_llm = Table(
    TABLE_NAME,
    metadata,
    Column("task_id", TaskId, primary_key=True, autoincrement=True),
    Column("task_name", String(255), nullable=True),
    Column("status", String(16), nullable=False, server_default=text("'pending'")),
    Column("attempt", Integer, nullable=False, server_default=text("0")),  # the fencing token
    Column("retry_count", Integer, nullable=False, server_default=text("0")),
    # Uncharged hand-backs that count towards DOCLLM_MAX_HANDBACKS (migration 0004, I12).
    Column("handbacks", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=True),
    Column("lease_token", String(64), nullable=True),
    Column("document", LongText, nullable=True),
    # The rubric its review follows, by name (migration 0005); NULL: none, as every older row.
    Column("rubric", String(64), nullable=True),
    # Its lane and tenant (migration 0006, issue 26); NULL: the default lane, no tenant.
    Column("priority", String(16), nullable=True),
    Column("tenant", String(64), nullable=True),
    # The task's trace context (W3C traceparent, migration 0008); NULL: not traced.
    Column("traceparent", String(64), nullable=True),
    # Reviewed without the review cache (``submit --fresh``, migration 0011); NULL: as every older row, no.
    Column("fresh", Boolean, nullable=True),
    Column("result", JsonText, nullable=True),
    Column("error", Text, nullable=True),
    timestamp("processing_started_at"),
    timestamp("finished_at"),
    timestamp("created_at", defaulted=True),
    timestamp("updated_at", defaulted=True),
    *usage_columns(),
    **MYSQL_TABLE_OPTIONS,
)
# The reconciler pages pending/processing rows by (updated_at, task_id) through this index (D8).
Index(STATUS_INDEX, task_doc_llm.c.status, task_doc_llm.c.updated_at)

# Provider batches of bulk tasks (issue 28, migration 0009): the durable record a batcher writes
# before it asks the provider anything (domain/batches/model.py). Its times are the authority's, given
# by the caller (the batch's deadlines are read on that clock), not the database's.
BATCHES_TABLE = "llm_batches"
BATCH_TASKS_TABLE = "llm_batch_tasks"
BATCH_TASKS_INDEX = "ix_llm_batch_tasks_task_id"
BATCHES_STATE_INDEX = "ix_llm_batches_state_created_at"

llm_batches = Table(
    BATCHES_TABLE,
    metadata,
    Column("ref", String(32), primary_key=True),
    Column("deployment", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    Column("batch_id", String(128), nullable=True, unique=True),
    Column("input_file_id", String(128), nullable=True),
    Column("output_file_id", String(128), nullable=True),
    Column("error_file_id", String(128), nullable=True),
    Column("provider_status", String(32), nullable=True),
    Column("tasks", Integer, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
    Column("cost_usd", Double, nullable=True),
    Column("error", Text, nullable=True),
    Column("max_chunk_chars", Integer, nullable=True),  # its lines' chunking (0010); NULL: before 0010
    **MYSQL_TABLE_OPTIONS,
)
# Pollers list the unfinished batches oldest first through this index.
Index(BATCHES_STATE_INDEX, llm_batches.c.state, llm_batches.c.created_at)

llm_batch_tasks = Table(
    BATCH_TASKS_TABLE,
    metadata,
    Column("ref", String(32), ForeignKey(f"{BATCHES_TABLE}.ref"), primary_key=True),
    Column("task_id", TaskId, primary_key=True, autoincrement=False),
    Column("attempt", Integer, primary_key=True, autoincrement=False),
    Column("asked", String(64), nullable=True),  # the digest of what its lines asked (0011; the review cache)
    **MYSQL_TABLE_OPTIONS,
)
# ``show`` and ``cancel`` find a task's batches through this index.
Index(BATCH_TASKS_INDEX, llm_batch_tasks.c.task_id)

# The review cache (issue 46, migration 0011; domain/review/cache.py): one chunk's answer per key,
# written in the transaction of the commit it came from. Its times are the authority's (ms), given
# by the caller: expiry is decided on that clock, never the database's (D4).
REVIEW_CACHE_TABLE = "review_cache"
REVIEW_CACHE_AGE_INDEX = "ix_review_cache_created_ms"

review_cache = Table(
    REVIEW_CACHE_TABLE,
    metadata,
    Column("cache_key", String(64), primary_key=True),
    Column("answer", LongText, nullable=False),  # {"findings", "summary"}, lines counted in the chunk
    Column("model", String(255), nullable=False),
    Column("deployment", String(128), nullable=True),
    Column("task_id", TaskId, nullable=False),  # whose committed report it came from
    Column("created_ms", BigInteger, nullable=False),
    Column("prompt_tokens", BigInteger, nullable=False, server_default=text("0")),
    Column("completion_tokens", BigInteger, nullable=False, server_default=text("0")),
    **MYSQL_TABLE_OPTIONS,
)
# Expiry's sweep takes the oldest entries through this index, a bounded page at a time.
Index(REVIEW_CACHE_AGE_INDEX, review_cache.c.created_ms)
# Findings a person judged (issue 46, migration 0012): one mark per (document name, fingerprint),
# domain/marks/model.py. Producers never see it.
MARKS_TABLE = "finding_marks"


def ExactString(length: int) -> Any:  # noqa: N802 - reads as the type it is
    """A key compared byte for byte: MySQL's default collation would make ``Acme`` and ``acme``,
    ``README.md`` and ``readme.md``, ``résumé.md`` and ``resume.md`` one key (SQLite compares exactly)."""
    return String(length).with_variant(VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb")


finding_marks = Table(
    MARKS_TABLE,
    metadata,
    Column("tenant", ExactString(64), primary_key=True),  # '' for tasks without a tenant (a key holds no NULL)
    Column("document", ExactString(255), primary_key=True),
    Column("fingerprint", ExactString(64), primary_key=True),
    Column("quote_print", String(64), nullable=True),  # the fingerprint without the heading
    Column("reason", String(16), nullable=False),
    Column("note", Text, nullable=True),
    Column("rule", String(255), nullable=True),
    Column("category", String(32), nullable=True),
    Column("severity", String(16), nullable=True),
    Column("quote", Text, nullable=True),
    Column("heading", Text, nullable=True),
    Column("message", Text, nullable=True),
    Column("task_id", TaskId, nullable=True),  # where it was marked; the task may be deleted since
    Column("number", Integer, nullable=True),
    Column("marked_by", String(255), nullable=True),
    timestamp("marked_at", defaulted=True),
    **MYSQL_TABLE_OPTIONS,
)
