"""The TaskStore role over SQLAlchemy Core: the writes (MySQL/MariaDB in production, SQLite embedded).

The writes of attempts go in groups (``write_group``; the single-row methods are groups of one):
one transaction per group, one conditional UPDATE per kind over the group's rows, each row fenced
on its own ``attempt`` and ``status`` in the UPDATE's WHERE, the rowcount checked against the
fences of the rows the transaction locked first. Nothing is read, changed and written back in Python.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import BigInteger, Double, Integer, String, bindparam, case, delete, false, func, insert, select, update
from sqlalchemy.exc import DataError, IntegrityError

from docllm.adapters.sql.repository.base import FAILED, FULL_ROW, PENDING, PROCESSING, RepositoryBase, task_of
from docllm.adapters.sql.schema import USAGE_COLUMNS, LongText
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.adapters.sql.timestamps import utcnow
from docllm.domain.errors import Unstorable
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import (
    WRITTEN_STATUS,
    FencedWrite,
    GroupOutcome,
    StartOutcome,
    StartRequest,
    StartResult,
    Task,
    WriteKind,
)
from docllm.domain.tasks.storable import storable_error
from docllm.domain.tasks.store_groups import GroupOfOne


def usage_params(usage: Usage | None) -> dict[str, Any]:
    if usage is None or not usage.calls:
        return {f"b_{name}": None for name in USAGE_COLUMNS}
    return {
        "b_llm_calls": usage.calls,
        "b_prompt_tokens": usage.prompt_tokens,
        "b_completion_tokens": usage.completion_tokens,
        "b_llm_seconds": round(usage.llm_seconds, 3),
        "b_cost_usd": usage.cost_usd,
        "b_llm_model": usage.model,
        "b_cached_tokens": usage.cached_tokens,
    }


class TaskStoreOps(GroupOfOne, RepositoryBase):
    def _write(
        self, stmt, task_id: int, landed: Callable[[Task | None], bool], params: dict[str, Any] | None = None
    ) -> bool:
        """Execute one conditional statement; True when it changed exactly one row.

        After a lost connection an earlier try may have committed, so a zero rowcount is then
        checked against the row: ``landed`` says whether the row is what this write makes it.
        """
        lost: list[bool] = []
        changed = self._retry(lambda: self._rowcount(stmt, params), on_lost=lambda: lost.append(True))
        if changed == 1:
            return True
        return bool(lost) and landed(self.get(task_id))

    def _rowcount(self, stmt, params: dict[str, Any] | None = None) -> int:
        with self._engine.begin() as conn:
            return conn.execute(stmt, params).rowcount

    def create(
        self,
        task_name: str,
        document: str,
        max_attempts: int | None = None,
        rubric: str | None = None,
        priority: str | None = None,
        tenant: str | None = None,
        traceparent: str | None = None,
    ) -> Task:
        if max_attempts is None:
            max_attempts = self._default_max_attempts

        def work(conn):
            stmt = insert(t).values(
                task_name=task_name,
                document=document,
                rubric=rubric,
                priority=priority,
                tenant=tenant,
                traceparent=traceparent,
                status=PENDING.value,
                max_attempts=max_attempts,
                created_at=utcnow(),
                updated_at=utcnow(),
            )
            return self._fetch(conn, conn.execute(stmt).inserted_primary_key[0])

        # An INSERT cut off by a lost connection may have landed: trying again could duplicate it.
        return self._run(work, idempotent=False)

    def write_group(self, writes: Sequence[FencedWrite], starts: Sequence[StartRequest] = ()) -> GroupOutcome:
        """One transaction: lock the group's rows (``SELECT ... FOR UPDATE``), one fenced ``UPDATE``
        per kind over its rows, one fenced ``UPDATE`` for the starts, one read of the started rows.

        The rows are locked before the fences are evaluated, so the fence the database applies
        per row (in each UPDATE's WHERE) is the one evaluated here on the locked row, and the
        rowcount of each UPDATE is checked against it. After a lost connection an earlier try may
        have committed: a write whose fence fails is then recognised from its row (``landed``),
        a start from its token (``StartOutcome.found``)."""
        writes, starts = list(writes), list(starts)
        if not writes and not starts:
            return GroupOutcome([], [])
        lost: list[bool] = []
        ids = sorted({w.task_id for w in writes} | {s.task_id for s in starts})
        texts = [result_text(w) for w in writes]
        sizes = [_sent_bytes(text, w) for text, w in zip(texts, writes, strict=True)]

        def work(conn):
            budget = statement_budget(conn.info.get(MAX_PACKET))
            _refuse_oversized(writes, sizes, budget)  # before anything is sent: the others may go
            rows = self._lock(conn, ids)  # task_id -> [status, attempt], kept as the UPDATEs change them
            written = [False] * len(writes)
            for rnd in _rounds(writes):  # more than one round only when a row repeats in the group
                fenced = {i for i in rnd if _holds(rows.get(writes[i].task_id), writes[i].attempt)}
                for kind in WriteKind:
                    # One UPDATE per kind, or several when its rows' bytes exceed one statement's budget.
                    for part in _parts([i for i in rnd if writes[i].kind is kind], sizes, budget):
                        statement = write_statement(kind, [writes[i] for i in part], [texts[i] for i in part])
                        _checked(conn.execute(*statement).rowcount, len(fenced.intersection(part)), kind.value)
                for i in rnd:
                    row = rows.get(writes[i].task_id)
                    written[i] = i in fenced or (bool(lost) and row is not None and _landed(row, writes[i]))
                    if i in fenced and row is not None:
                        row[0] = writes[i].status.value
            for rnd in _rounds(starts):
                fenced = {i for i in rnd if (row := rows.get(starts[i].task_id)) and row[0] == PENDING.value}
                changed = conn.execute(*start_statement([starts[i] for i in rnd])).rowcount
                _checked(changed, len(fenced), "start")
                for i in fenced:
                    rows[starts[i].task_id][:] = [PROCESSING.value, rows[starts[i].task_id][1] + 1]
            found = self._started_rows(conn, sorted({s.task_id for s in starts}))
            missing = StartOutcome(StartResult.missing)
            started = [StartOutcome.found(found[s.task_id], s.token) if s.task_id in found else missing for s in starts]
            return GroupOutcome(written, started)

        try:
            return self._retry(lambda: self._in_transaction(work), on_lost=lambda: lost.append(True))
        except UnicodeEncodeError as exc:  # a value the driver cannot send as UTF-8 (a lone surrogate)
            raise Unstorable(
                f"it holds a character no UTF-8 column stores ({exc.reason}: {exc.object[exc.start : exc.end]!r})"
            ) from exc
        except (DataError, IntegrityError) as exc:  # the server refuses a value (too long, not valid)
            raise Unstorable(f"the database refused it: {exc.orig}") from exc

    def _in_transaction(self, work: Callable[[Any], Any]) -> Any:
        with self._engine.begin() as conn:
            return work(conn)

    def _lock(self, conn, ids: list[int]) -> dict[int, list[Any]]:
        """The group's rows, locked until the transaction ends (in primary-key order: two groups
        in flight lock their common rows in the same order). SQLite has no row locks: a write
        first takes the database's write lock, so nothing changes the rows until the commit."""
        if conn.dialect.name == "sqlite":
            conn.execute(TAKE_WRITE_LOCK)
            return self._fences(conn, ids)
        return self._fences(conn, ids, lock=True)

    @staticmethod
    def _fences(conn, ids: list[int], lock: bool = False) -> dict[int, list[Any]]:
        stmt = select(*FENCE_COLUMNS).where(t.c.task_id.in_(ids)).order_by(t.c.task_id)
        if lock:
            stmt = stmt.with_for_update()
        return {row.task_id: [row.status, row.attempt] for row in conn.execute(stmt)}

    @staticmethod
    def _started_rows(conn, ids: list[int]) -> dict[int, Task]:
        if not ids:
            return {}
        stmt = select(*FULL_ROW).where(t.c.task_id.in_(ids))
        return {task.task_id: task for task in (task_of(row) for row in conn.execute(stmt))}

    def reopen(self, task_id: int) -> bool:
        # ``attempt`` is left alone: it is the fencing token and must keep growing.
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.status == FAILED.value)
            .values(
                status=PENDING.value,
                retry_count=0,
                handbacks=0,
                lease_token=None,
                processing_started_at=None,
                finished_at=None,
                updated_at=utcnow(),
            )
        )
        return self._write(stmt, task_id, lambda row: row is not None and row.status == PENDING)

    def cancel_pending(self, task_id: int, attempt: int, error: str) -> bool:
        stmt = (
            update(t)
            .where(t.c.task_id == task_id, t.c.attempt == attempt, t.c.status == PENDING.value)
            .values(status=FAILED.value, error=error, lease_token=None, finished_at=utcnow(), updated_at=utcnow())
        )
        return self._write(stmt, task_id, lambda row: _cancelled(row, attempt, error))

    def delete(self, task_id: int) -> bool:
        return self._write(delete(t).where(t.c.task_id == task_id), task_id, lambda row: row is None)


def _cancelled(row: Task | None, attempt: int, error: str) -> bool:
    return row is not None and row.attempt == attempt and row.status == FAILED and row.error == error


# Where the engine keeps a connection's max_allowed_packet as the server reports it (engine.py);
# absent for SQLite, whose statements have no such bound.
MAX_PACKET = "max_allowed_packet"
# What a statement sends beyond its rows' values (its SQL), and each row beyond its result and
# error (its id, attempt, usage, and its CASE branches in the SQL), with a wide margin.
STATEMENT_BYTES = 64 * 1024
ROW_BYTES = 4 * 1024


def statement_budget(max_packet: int | None) -> int | None:
    """The bytes a group's statement may carry for its rows' values: below the server's packet
    limit by the statement's own text (None: no limit)."""
    return None if not max_packet else max(max_packet - STATEMENT_BYTES, max_packet // 2)


def result_text(write: FencedWrite) -> str | None:
    """A commit's report as the ``result`` column stores it (``schema.JsonText``), serialised once:
    its size bounds the statement, and the statement sends it."""
    return json.dumps(write.result or {}, ensure_ascii=False) if write.kind is WriteKind.commit else None


def _sent_bytes(text: str | None, write: FencedWrite) -> int:
    """What a write adds to its statement on the wire, at most: its values' UTF-8 bytes, each quote
    and backslash escaped (PyMySQL sends the values inside the statement's text)."""
    size = ROW_BYTES
    for value in (text, write.error):
        if value:
            size += (len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))) + sum(
                value.count(c) for c in "\\\"'"
            )
    return size


def _refuse_oversized(writes: Sequence[FencedWrite], sizes: Sequence[int], budget: int | None) -> None:
    """A write that would not fit one statement alone is the group's guilty item: refused before
    the group sends anything (the server would drop the connection, which reads as an outage)."""
    if budget is None:
        return
    for write, size in zip(writes, sizes, strict=True):
        if size > budget:
            what = "report" if write.kind is WriteKind.commit else "write"
            raise Unstorable(
                f"the {what} of task {write.task_id} is {size:,} bytes, over the {budget:,} bytes a statement "
                f"may carry below the database's max_allowed_packet"
            )


def _parts(indexes: list[int], sizes: Sequence[int], budget: int | None) -> list[list[int]]:
    """``indexes`` in consecutive parts whose ``sizes`` add up to at most ``budget`` each (one part
    when there is no budget; none when there is no index)."""
    if budget is None or sum(sizes[i] for i in indexes) <= budget:
        return [indexes] if indexes else []
    parts: list[list[int]] = [[]]
    used = 0
    for i in indexes:
        if parts[-1] and used + sizes[i] > budget:
            parts.append([])
            used = 0
        parts[-1].append(i)
        used += sizes[i]
    return parts


# What a fence reads of a row, and a statement that takes SQLite's write lock and changes nothing.
FENCE_COLUMNS = (t.c.task_id, t.c.status, t.c.attempt)
TAKE_WRITE_LOCK = update(t).where(false()).values(status=t.c.status)


def _holds(row: list[Any] | None, attempt: int) -> bool:
    """The fence of an end-of-attempt write: the row is processing under this attempt."""
    return row is not None and row[0] == PROCESSING.value and row[1] == attempt


def _landed(row: list[Any], write: FencedWrite) -> bool:
    """The row is what ``write`` makes it: an earlier try, whose answer was lost, landed."""
    return row[0] == write.status.value and row[1] == write.attempt


def _checked(rowcount: int, expected: int, what: str) -> None:
    if rowcount != expected:  # the database and the locked rows disagree: write nothing
        raise RuntimeError(f"grouped {what}: {rowcount} rows changed where the locked rows' fences allow {expected}")


def _rounds(items: Sequence[Any]) -> list[list[int]]:
    """Indexes of ``items`` in rounds in which no row repeats, each row's items in their order."""
    rounds: list[list[int]] = []
    seen: dict[int, int] = {}
    for i, item in enumerate(items):
        n = seen[item.task_id] = seen.get(item.task_id, -1) + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(i)
    return rounds


def _usage_values(by_row: Callable[[str, Any], Any]) -> dict[str, Any]:
    """Each row's attempt usage added to the row's (a row whose attempt made no call adds NULL: the
    column keeps its value)."""
    values: dict[str, Any] = {}
    for name, (column, kind) in USAGE_KINDS.items():
        added = by_row(name, kind)
        values[name] = (
            func.coalesce(added, column) if name == "llm_model" else func.coalesce(column + added, column, added)
        )
    return values


USAGE_KINDS = {
    "llm_calls": (t.c.llm_calls, Integer()),
    "prompt_tokens": (t.c.prompt_tokens, BigInteger()),
    "completion_tokens": (t.c.completion_tokens, BigInteger()),
    "llm_seconds": (t.c.llm_seconds, Double()),
    "cost_usd": (t.c.cost_usd, Double()),
    "llm_model": (t.c.llm_model, String()),
    "cached_tokens": (t.c.cached_tokens, BigInteger()),
}
ID = t.c.task_id.type


def _rows(n: int) -> tuple[list[Any], Callable[[str, Any], Any]]:
    """The ids of ``n`` rows bound as ``r{i}_id``, and a maker of per-row values over them:
    ``CASE task_id WHEN :r0_id THEN :r0_<name> ... END``."""
    ids = [bindparam(f"r{i}_id", type_=ID) for i in range(n)]

    def by_row(name: str, kind: Any) -> Any:
        return case({ids[i]: bindparam(f"r{i}_{name}", type_=kind) for i in range(n)}, value=t.c.task_id)

    return ids, by_row


# A statement's shape is built once and its values bound by name per group: building the CASEs (some
# 18 bound values a row) cost ~170 us a row, 7 % of a worker's loop at C = 1,024. A group's writes
# are at most 64 rows (StoreBatcher) and a claimed batch's starts at most the concurrency, so the
# shapes are few; their SQL is SQLAlchemy's compiled cache's, which holds as many.
SHAPES = 512


@functools.lru_cache(maxsize=SHAPES)
def _write_shape(kind: WriteKind, n: int, usage: bool) -> Any:
    """One UPDATE of ``n`` writes of one kind (each row at most once), fenced per row on its attempt
    and ``processing``; values that differ per row are CASE expressions over ``task_id``."""
    ids, by_row = _rows(n)
    values: dict[str, Any] = {"status": WRITTEN_STATUS[kind].value, "updated_at": utcnow()}
    if usage:
        values.update(_usage_values(by_row))
    if kind is WriteKind.commit:  # the report bound as its JSON text (``result_text``), serialised once
        values.update(result=by_row("result", LongText), error=None, finished_at=utcnow())
    else:
        values["error"] = by_row("error", String())
    if kind in (WriteKind.retry, WriteKind.fail):
        values["retry_count"] = t.c.retry_count + 1
    if kind is WriteKind.fail:
        values["finished_at"] = utcnow()
    if kind in (WriteKind.retry, WriteKind.hand_back):
        values.update(lease_token=None, processing_started_at=None)
    if kind is WriteKind.hand_back:
        values["handbacks"] = t.c.handbacks + by_row("counted", Integer())
    fence = (t.c.task_id.in_(ids), t.c.status == PROCESSING.value, t.c.attempt == by_row("attempt", Integer()))
    return update(t).where(*fence).values(**values)


def write_statement(
    kind: WriteKind, writes: Sequence[FencedWrite], texts: Sequence[str | None] | None = None
) -> tuple[Any, dict[str, Any]]:
    """The UPDATE of the writes of one kind (each row at most once) and its values; ``texts``: the
    commits' ``result_text``, when already made."""
    usage = any(w.usage is not None and w.usage.calls for w in writes)
    params: dict[str, Any] = {}
    for i, w in enumerate(writes):
        row = f"r{i}_"
        params[row + "id"], params[row + "attempt"] = w.task_id, w.attempt
        if kind is WriteKind.commit:
            params[row + "result"] = texts[i] if texts is not None else result_text(w)
        else:
            params[row + "error"] = storable_error(w.error or "")
        if kind is WriteKind.hand_back:
            params[row + "counted"] = 1 if w.counted else 0
        if usage:
            params.update((row + name.removeprefix("b_"), value) for name, value in usage_params(w.usage).items())
    return _write_shape(kind, len(writes), usage), params


@functools.lru_cache(maxsize=SHAPES)
def _start_shape(n: int) -> Any:
    """One UPDATE of ``n`` starts (each row at most once): pending -> processing, attempt + 1, each
    row's own token; fenced per row on ``pending``."""
    ids, by_row = _rows(n)
    return (
        update(t)
        .where(t.c.task_id.in_(ids), t.c.status == PENDING.value)
        .values(
            status=PROCESSING.value,
            attempt=t.c.attempt + 1,
            lease_token=by_row("token", String()),
            processing_started_at=utcnow(),
            finished_at=None,
            updated_at=utcnow(),
        )
    )


def start_statement(starts: Sequence[StartRequest]) -> tuple[Any, dict[str, Any]]:
    """The UPDATE of the starts and its values."""
    params: dict[str, Any] = {}
    for i, s in enumerate(starts):
        params[f"r{i}_id"], params[f"r{i}_token"] = s.task_id, s.token
    return _start_shape(len(starts)), params
