"""One contract for every BatchStore: in memory, SQLite (a file) and a real MariaDB.

The compare-and-set is the point (issue 28, I15): of pollers that race to move a batch from one
state exactly one lands, and a batch that is applied or returned never changes again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from docllm.domain.batches.model import BatchCount, BatchMember, BatchState
from docllm.domain.batches.ports import BatchStore
from tests.support.memory.batches import InMemoryBatchStore

OPEN, UPLOADED, SUBMITTED, APPLIED, RETURNED = BatchState
T0 = 1_700_000_000_000  # authority ms


@pytest.fixture(params=["memory", "sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
def store(request, tmp_path) -> Iterator[BatchStore]:
    if request.param == "memory":
        yield InMemoryBatchStore()
        return
    from docllm.adapters.sql.batches import SqlAlchemyBatchStore
    from docllm.adapters.sql.engine import make_engine
    from docllm.adapters.sql.migrations import upgrade_schema

    url = f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else request.getfixturevalue("mysql_url")
    engine = make_engine(url)
    upgrade_schema(engine)
    yield SqlAlchemyBatchStore(engine)
    engine.dispose()


def submitted(store: BatchStore, ref: str = "a" * 32, at: int = T0) -> None:
    store.open(ref, "gpt", [(1, 1)], at)
    assert store.advance(ref, OPEN, UPLOADED, at + 1, input_file_id=f"file-{ref}")
    assert store.advance(ref, UPLOADED, SUBMITTED, at + 2, batch_id=f"batch-{ref}")


def test_adapter_has_every_method_of_the_port(store):
    wanted = {name for name in vars(BatchStore) if not name.startswith("_")}
    assert {name for name in wanted if not callable(getattr(store, name, None))} == set()


def test_open_records_the_batch_and_its_members(store):
    batch = store.open("r1", "gpt-4o", [(42, 3), (7, 1), BatchMember(9, 2)], T0)
    assert (batch.ref, batch.deployment, batch.state, batch.tasks) == ("r1", "gpt-4o", OPEN, 3)
    assert batch.members == (BatchMember(7, 1), BatchMember(9, 2), BatchMember(42, 3))
    got = store.get("r1")
    assert got == batch  # members round-trip, in task order, with every field
    assert got.created_at == got.updated_at and got.age_ms(T0 + 500) == 500
    assert (got.batch_id, got.input_file_id, got.provider_status, got.cost_usd, got.error) == (None,) * 5
    assert store.get("nope") is None


def test_the_chunking_a_batch_was_built_with_is_recorded_with_it(store):
    assert store.open("r1", "gpt-4o", [(1, 1)], T0).max_chunk_chars is None  # before 0010: not kept
    store.open("r2", "gpt-4o", [(2, 1)], T0, max_chunk_chars=4000)
    assert store.get("r2").max_chunk_chars == 4000
    assert store.advance("r2", OPEN, UPLOADED, T0 + 1, input_file_id="f")
    assert store.get("r2").max_chunk_chars == 4000
    assert {b.ref: b.max_chunk_chars for b in store.unfinished()} == {"r1": None, "r2": 4000}


def test_a_ref_is_recorded_once_and_a_task_once_per_batch(store):
    store.open("r1", "gpt", [(1, 1)], T0)
    with pytest.raises(ValueError):
        store.open("r1", "gpt", [(2, 1)], T0)
    with pytest.raises(ValueError):
        store.open("r2", "gpt", [(3, 1), (3, 2)], T0)
    assert store.get("r1").members == (BatchMember(1, 1),) and store.get("r2") is None


def test_advance_moves_along_the_life_and_records_its_fields(store):
    store.open("r1", "gpt", [(1, 1), (2, 4)], T0)
    assert store.advance("r1", OPEN, UPLOADED, T0 + 10, input_file_id="file-in")
    assert store.advance("r1", UPLOADED, SUBMITTED, T0 + 20, batch_id="batch_1", provider_status="validating")
    assert store.advance("r1", SUBMITTED, SUBMITTED, T0 + 30, provider_status="in_progress")  # a poll
    assert store.advance(
        "r1", SUBMITTED, APPLIED, T0 + 40, output_file_id="file-out", error_file_id="file-err", cost_usd=0.25
    )
    batch = store.get("r1")
    assert batch.state is APPLIED and batch.idle_ms(T0 + 40) == 0 and batch.age_ms(T0 + 40) == 40
    assert (batch.input_file_id, batch.batch_id, batch.provider_status) == ("file-in", "batch_1", "in_progress")
    assert (batch.output_file_id, batch.error_file_id, batch.cost_usd) == ("file-out", "file-err", 0.25)
    assert batch.members == (BatchMember(1, 1), BatchMember(2, 4))  # the moves leave the members alone


def test_advance_from_a_state_the_batch_is_not_in_changes_nothing(store):
    store.open("r1", "gpt", [(1, 1)], T0)
    assert not store.advance("r1", UPLOADED, SUBMITTED, T0 + 1, batch_id="b")
    assert not store.advance("missing", OPEN, UPLOADED, T0 + 1)
    batch = store.get("r1")
    assert (batch.state, batch.batch_id, batch.updated_at) == (OPEN, None, batch.created_at)


def test_of_two_racing_advances_from_one_state_exactly_one_lands(store):
    submitted(store)
    ref = "a" * 32
    won = [
        store.advance(ref, SUBMITTED, APPLIED, T0 + 9, cost_usd=1.0),
        store.advance(ref, SUBMITTED, RETURNED, T0 + 9),
    ]
    assert won == [True, False] and store.get(ref).state is APPLIED


def test_of_pollers_racing_on_threads_exactly_one_lands(store):
    refs = [f"{i:032x}" for i in range(5)]
    for ref in refs:
        submitted(store, ref)
    wins: list[tuple[str, BatchState]] = []
    lock = threading.Lock()

    def poller(to: BatchState) -> None:
        for ref in refs:
            if store.advance(ref, SUBMITTED, to, T0 + 9, error=to.value):
                with lock:
                    wins.append((ref, to))

    threads = [threading.Thread(target=poller, args=(to,)) for to in (APPLIED, RETURNED, APPLIED, RETURNED)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(ref for ref, _ in wins) == refs  # one winner per batch
    for ref, to in wins:
        batch = store.get(ref)
        assert (batch.state, batch.error) == (to, to.value)  # the winner's fields, nobody else's


def test_a_terminal_batch_never_changes_again(store):
    submitted(store, "x" * 32)
    store.open("y" * 32, "gpt", [(2, 1)], T0)
    assert store.advance("x" * 32, SUBMITTED, APPLIED, T0 + 5)
    assert store.advance("y" * 32, OPEN, RETURNED, T0 + 5, error="the upload failed")
    for ref, was in (("x" * 32, APPLIED), ("y" * 32, RETURNED)):
        for frm in (OPEN, UPLOADED, SUBMITTED):
            assert not store.advance(ref, frm, RETURNED, T0 + 6)
        for to in BatchState:  # from a terminal state there is no move at all: a caller's bug
            with pytest.raises(ValueError):
                store.advance(ref, was, to, T0 + 6)
        batch = store.get(ref)
        assert batch.state is was and batch.idle_ms(T0 + 5) == 0  # as the terminal move left it


def test_a_move_the_life_does_not_have_is_refused(store):
    store.open("r1", "gpt", [(1, 1)], T0)
    for frm, to in ((OPEN, APPLIED), (UPLOADED, APPLIED), (SUBMITTED, UPLOADED), (SUBMITTED, OPEN)):
        with pytest.raises(ValueError):
            store.advance("r1", frm, to, T0 + 1)
    assert store.get("r1").state is OPEN


def test_a_provider_batch_id_belongs_to_one_batch(store):
    submitted(store, "a" * 32)
    store.open("b" * 32, "gpt", [(2, 1)], T0)
    with pytest.raises(ValueError):
        store.advance("b" * 32, OPEN, SUBMITTED, T0 + 1, batch_id="batch-" + "a" * 32)
    assert store.get("b" * 32).state is OPEN


def test_unfinished_lists_the_batches_not_terminal_oldest_first_without_members(store):
    for i, ref in enumerate(["c", "a", "d", "b"]):
        store.open(ref * 32, "gpt", [(i + 1, 1)], T0 + 1000 * (4 - i))  # "b" oldest, "c" newest
    assert store.advance("d" * 32, OPEN, RETURNED, T0 + 9000)
    assert store.advance("a" * 32, OPEN, UPLOADED, T0 + 9000, input_file_id="f")
    listed = store.unfinished()
    assert [b.ref[0] for b in listed] == ["b", "a", "c"]
    assert [b.state for b in listed] == [OPEN, UPLOADED, OPEN] and [b.tasks for b in listed] == [1, 1, 1]
    assert all(b.members == () for b in listed)
    assert [b.ref[0] for b in store.unfinished(limit=2)] == ["b", "a"]


def test_of_task_names_the_batches_holding_it_newest_first(store):
    store.open("old" + "0" * 29, "gpt", [(5, 1), (6, 1)], T0)
    store.open("new" + "0" * 29, "gpt", [(5, 2)], T0 + 1000)
    store.open("oth" + "0" * 29, "gpt", [(6, 2)], T0 + 2000)
    assert store.of_task(5) == ["new" + "0" * 29, "old" + "0" * 29]
    assert store.of_task(6) == ["oth" + "0" * 29, "old" + "0" * 29]
    assert store.of_task(7) == []


def test_recent_lists_the_newest_first_whatever_their_state(store):
    for i in range(5):
        store.open(f"{i:032x}", "gpt", [(i + 1, 1), (i + 100, 1)], T0 + i)
    assert store.advance(f"{3:032x}", OPEN, RETURNED, T0 + 10)
    listed = store.recent(3)
    assert [b.ref for b in listed] == [f"{i:032x}" for i in (4, 3, 2)]
    assert [b.state for b in listed] == [OPEN, RETURNED, OPEN] and {b.tasks for b in listed} == {2}
    assert all(b.members == () for b in listed)


def test_counts_give_every_state_with_its_batches_and_their_tasks(store):
    assert store.counts() == {s: BatchCount(0, 0) for s in BatchState}  # every state, zeros included
    store.open("a" * 32, "gpt", [(1, 1), (2, 1), (3, 1)], T0)
    store.open("b" * 32, "gpt", [(4, 1)], T0 + 1)
    submitted(store, "c" * 32, T0 + 2)
    store.open("d" * 32, "gpt", [(5, 1), (6, 1)], T0 + 3)
    assert store.advance("d" * 32, OPEN, RETURNED, T0 + 9)
    got = store.counts()
    assert got[OPEN] == BatchCount(2, 4) and got[SUBMITTED] == BatchCount(1, 1) and got[RETURNED] == BatchCount(1, 2)
    assert got[UPLOADED] == got[APPLIED] == BatchCount(0, 0) and set(got) == set(BatchState)


def test_a_batch_of_many_tasks_round_trips(store):
    members = [(task_id, 1 + task_id % 3) for task_id in range(1, 1201)]
    store.open("big", "gpt", members, T0)
    batch = store.get("big")
    assert batch.tasks == 1200 and [(m.task_id, m.attempt) for m in batch.members] == members
