"""How batches are shown (entrypoints/batch_view.py), over the in-memory BatchStore: nothing
without batches; every unfinished batch shown however old, beside the newest ones; a task's batches."""

from __future__ import annotations

from docllm.domain.batches.model import BatchState
from docllm.entrypoints import batch_view
from tests.support.memory.batches import InMemoryBatchStore

OPEN, UPLOADED, SUBMITTED, APPLIED, RETURNED = BatchState
T0 = 1_700_000_000_000


def test_no_batch_no_section_and_no_table():
    assert batch_view.batches_json(InMemoryBatchStore(), T0) is None
    assert batch_view.batch_tables({"tasks": {}}) == []
    assert batch_view.task_batches_json(InMemoryBatchStore(), 1) == []


def test_an_old_unfinished_batch_is_shown_beside_the_newest_ones():
    store = InMemoryBatchStore()
    store.open("old" + "0" * 29, "gpt", [(1, 1)], T0)  # unfinished, older than every other
    assert store.advance("old" + "0" * 29, OPEN, SUBMITTED, T0 + 1, batch_id="batch_old")
    for i in range(batch_view.SHOWN_RECENT + 5):  # newer, all applied
        ref = f"{i + 1:032x}"
        store.open(ref, "gpt", [(100 + i, 1)], T0 + 1000 * (i + 1))
        assert store.advance(ref, OPEN, SUBMITTED, T0 + 1000 * (i + 1), batch_id=f"batch_{i}")
        assert store.advance(ref, SUBMITTED, APPLIED, T0 + 1000 * (i + 1), cost_usd=0.5)
    shown = batch_view.batches_json(store, T0 + 60_000)
    assert shown is not None and shown["by_state"]["applied"] == batch_view.SHOWN_RECENT + 5
    refs = [b["ref"] for b in shown["shown"]]
    assert len(refs) == batch_view.SHOWN_RECENT + 1 and refs[-1] == "old" + "0" * 29  # newest first, then it
    assert shown["shown"][-1]["age_s"] == 60.0 and shown["tasks_in_unfinished"] == 1


def test_a_task_names_each_batch_holding_it_with_its_attempt():
    store = InMemoryBatchStore()
    store.open("a" * 32, "gpt", [(7, 1), (8, 1)], T0)
    assert store.advance("a" * 32, OPEN, RETURNED, T0 + 5)  # handed back; the task went on in another
    store.open("b" * 32, "gpt", [(7, 2)], T0 + 10)
    got = batch_view.task_batches_json(store, 7)
    assert got == [
        {"ref": "b" * 32, "batch_id": None, "state": "open", "attempts": [2]},
        {"ref": "a" * 32, "batch_id": None, "state": "returned", "attempts": [1]},
    ]
    assert batch_view.task_batches_lines(got)[1] == f"batch {'a' * 32} (no batch id yet) returned, attempt 1"
