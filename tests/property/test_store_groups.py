"""Grouped writes against the one-row-at-a-time reference (issue 31).

Random interleavings of attempts that start, finish, go stale (their lease was lost and someone
settled the row, so the attempt's number is old), operator cancels and reopens, and crashes (a
crash ends the process before its group is sent: the group is never applied). The steps between
two sends pile up in one group, so a group holds stale and current writes, several writes and
starts of one row, and rows in every state. The SQL adapter (SQLite) applies each group as one
transaction (``write_group``); the in-memory reference applies the same requests one at a time.
Every answer, and every row afterwards, must be the same.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.domain.llm.usage import Usage
from docllm.domain.tasks.model import FencedWrite, StartRequest, Task, TaskStatus, WriteKind
from tests.support.memory.repository import InMemoryTaskRepository

ROWS = 4
USAGE = Usage(calls=1, prompt_tokens=3, completion_tokens=2, llm_seconds=0.25, model="m")

write_step = st.tuples(
    st.just("write"),
    st.sampled_from(list(WriteKind)),
    st.integers(0, ROWS - 1),
    st.sampled_from(["current", "stale", "next"]),  # the row's attempt, one before it (lease lost), one after
    st.booleans(),  # with usage / counted
)
start_step = st.tuples(st.just("start"), st.integers(0, ROWS - 1), st.integers(0, 3))  # a token of four
other_step = st.tuples(st.sampled_from(["send", "crash", "cancel", "reopen"]), st.integers(0, ROWS - 1))
steps = st.lists(st.one_of(write_step, start_step, other_step), min_size=1, max_size=40)


def comparable(task: Task | None) -> tuple | None:
    if task is None:
        return None
    usage = task.usage
    used = None if usage is None else (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.model)
    return (
        task.status,
        task.attempt,
        task.retry_count,
        task.handbacks,
        task.lease_token,
        task.error,
        task.result,
        used,
        task.processing_started_at is None,
        task.finished_at is None,
    )


def a_write(kind: WriteKind, task_id: int, attempt: int, extra: bool) -> FencedWrite:
    usage = USAGE if extra else None
    if kind is WriteKind.commit:
        return FencedWrite(kind, task_id, attempt, result={"attempt": attempt}, usage=usage)
    error = f"{kind.value} of attempt {attempt}"
    return FencedWrite(kind, task_id, attempt, error=error, usage=usage, counted=extra and kind is WriteKind.hand_back)


@given(steps)
def test_grouped_writes_leave_the_rows_the_one_at_a_time_reference_leaves(plan):
    engine = make_engine("sqlite://")
    upgrade_schema(engine)
    sql, ref = SqlAlchemyTaskRepository(engine), InMemoryTaskRepository()
    try:
        ids = [sql.create(f"doc-{i}", "body").task_id for i in range(ROWS)]
        assert [ref.create(f"doc-{i}", "body").task_id for i in range(ROWS)] == ids
        writes: list[FencedWrite] = []
        starts: list[StartRequest] = []
        for step in plan:
            what = step[0]
            if what == "write":
                _, kind, row, which, extra = step
                attempt = ref.get(ids[row]).attempt + {"current": 0, "stale": -1, "next": 1}[which]
                writes.append(a_write(kind, ids[row], attempt, extra))
            elif what == "start":
                starts.append(StartRequest(ids[step[1]], f"tok-{step[2]}"))
            elif what == "crash":  # the process died before its group went out: none of it lands
                writes, starts = [], []
            elif what in ("cancel", "reopen"):  # the operator, between two groups
                task_id = ids[step[1]]
                row = ref.get(task_id)
                if what == "cancel":
                    assert sql.cancel_pending(task_id, row.attempt, "cancelled") == ref.cancel_pending(
                        task_id, row.attempt, "cancelled"
                    )
                else:
                    assert sql.reopen(task_id) == ref.reopen(task_id)
            else:  # send the group
                grouped = sql.write_group(writes, starts)
                reference = ref.write_group(writes, starts)
                assert grouped.written == reference.written
                assert [(s.result, comparable(s.task)) for s in grouped.started] == [
                    (s.result, comparable(s.task)) for s in reference.started
                ]
                writes, starts = [], []
            assert [comparable(sql.get(i)) for i in ids] == [comparable(ref.get(i)) for i in ids]
        assert all(sql.get(i).status in TaskStatus for i in ids)
    finally:
        engine.dispose()
