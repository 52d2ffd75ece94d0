"""The TaskStore role over SQLAlchemy Core: the writes (MySQL/MariaDB in production, SQLite embedded).

The writes of attempts go in groups (``write_group``; the single-row methods are groups of one):
one transaction per group, one conditional UPDATE per kind over the group's rows, each row fenced
on its own ``attempt`` and ``status`` in the UPDATE's WHERE, the rowcount checked against the
fences of the rows the transaction locked first. Nothing is read, changed and written back in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import BigInteger, Double, Integer, String, case, delete, false, func, insert, literal, select, update

from docllm.adapters.sql.repository.base import FAILED, FULL_ROW, PENDING, PROCESSING, RepositoryBase, task_of
from docllm.adapters.sql.schema import USAGE_COLUMNS
from docllm.adapters.sql.schema import task_doc_llm as t
from docllm.adapters.sql.timestamps import utcnow
from docllm.domain.model import (
    WRITTEN_STATUS,
    FencedWrite,
    GroupOutcome,
    StartOutcome,
    StartRequest,
    StartResult,
    Task,
    WriteKind,
)
from docllm.domain.store_groups import GroupOfOne
from docllm.domain.usage import Usage


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

        def work(conn):
            rows = self._lock(conn, ids)  # task_id -> [status, attempt], kept as the UPDATEs change them
            written = [False] * len(writes)
            for rnd in _rounds(writes):  # more than one round only when a row repeats in the group
                fenced = {i for i in rnd if _holds(rows.get(writes[i].task_id), writes[i].attempt)}
                for kind in WriteKind:
                    of_kind = [i for i in rnd if writes[i].kind is kind]
                    if of_kind:
                        changed = conn.execute(write_statement(kind, [writes[i] for i in of_kind])).rowcount
                        _checked(changed, len(fenced.intersection(of_kind)), kind.value)
                for i in rnd:
                    row = rows.get(writes[i].task_id)
                    written[i] = i in fenced or (bool(lost) and row is not None and _landed(row, writes[i]))
                    if i in fenced and row is not None:
                        row[0] = writes[i].status.value
            for rnd in _rounds(starts):
                fenced = {i for i in rnd if (row := rows.get(starts[i].task_id)) and row[0] == PENDING.value}
                changed = conn.execute(start_statement([starts[i] for i in rnd])).rowcount
                _checked(changed, len(fenced), "start")
                for i in fenced:
                    rows[starts[i].task_id][:] = [PROCESSING.value, rows[starts[i].task_id][1] + 1]
            found = self._started_rows(conn, sorted({s.task_id for s in starts}))
            missing = StartOutcome(StartResult.missing)
            started = [StartOutcome.found(found[s.task_id], s.token) if s.task_id in found else missing for s in starts]
            return GroupOutcome(written, started)

        return self._retry(lambda: self._in_transaction(work), on_lost=lambda: lost.append(True))

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


def _per_row(rows: Sequence[Any], value: Callable[[Any], Any], kind: Any = None) -> Any:
    """``CASE task_id WHEN id THEN value ... END`` over the rows whose value is not None (NULL otherwise)."""
    whens = {r.task_id: literal(v, kind) for r in rows if (v := value(r)) is not None}
    return case(whens, value=t.c.task_id) if whens else None


def _usage_values(writes: Sequence[FencedWrite]) -> dict[str, Any]:
    """Each row's attempt usage added to the row's (columns no write of the group adds to are left out)."""
    values: dict[str, Any] = {}
    used = [w for w in writes if w.usage is not None and w.usage.calls]
    params = {w.task_id: usage_params(w.usage) for w in used}  # once per write, not once per column
    for name, (column, kind) in USAGE_KINDS.items():
        key = f"b_{name}"
        added = _per_row(used, lambda w: params[w.task_id][key], kind)  # noqa: B023 - called in this turn
        if added is None:
            continue
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


def write_statement(kind: WriteKind, writes: Sequence[FencedWrite]):
    """One UPDATE of the writes of one kind (each row at most once), fenced per row on its attempt
    and ``processing``; values that differ per row are CASE expressions over ``task_id``."""
    ids = [w.task_id for w in writes]
    values: dict[str, Any] = {"status": WRITTEN_STATUS[kind].value, "updated_at": utcnow(), **_usage_values(writes)}
    if kind is WriteKind.commit:
        values.update(
            result=_per_row(writes, lambda w: w.result or {}, t.c.result.type), error=None, finished_at=utcnow()
        )
    else:
        values["error"] = _per_row(writes, lambda w: w.error or "", String())
    if kind in (WriteKind.retry, WriteKind.fail):
        values["retry_count"] = t.c.retry_count + 1
    if kind is WriteKind.fail:
        values["finished_at"] = utcnow()
    if kind in (WriteKind.retry, WriteKind.hand_back):
        values.update(lease_token=None, processing_started_at=None)
    if kind is WriteKind.hand_back and any(w.counted for w in writes):
        values["handbacks"] = t.c.handbacks + case(
            {w.task_id: 1 for w in writes if w.counted}, value=t.c.task_id, else_=0
        )
    attempt = case({w.task_id: w.attempt for w in writes}, value=t.c.task_id)
    fence = (t.c.task_id.in_(ids), t.c.status == PROCESSING.value, t.c.attempt == attempt)
    return update(t).where(*fence).values(**values)


def start_statement(starts: Sequence[StartRequest]):
    """One UPDATE of the starts (each row at most once): pending -> processing, attempt + 1, each
    row's own token; fenced per row on ``pending``."""
    return (
        update(t)
        .where(t.c.task_id.in_([s.task_id for s in starts]), t.c.status == PENDING.value)
        .values(
            status=PROCESSING.value,
            attempt=t.c.attempt + 1,
            lease_token=_per_row(starts, lambda s: s.token, String()),
            processing_started_at=utcnow(),
            finished_at=None,
            updated_at=utcnow(),
        )
    )
