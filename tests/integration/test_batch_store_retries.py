"""The SQL BatchStore after a lost connection (SQLite): a write whose COMMIT landed but whose answer
was lost is tried again; the second try must recognise the first one's work, neither failing on
it nor taking it for a racer's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from docllm.adapters.sql.batches import SqlAlchemyBatchStore
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.domain.batches.model import BatchMember, BatchState

OPEN, UPLOADED, SUBMITTED, APPLIED, RETURNED = BatchState
T0 = 1_700_000_000_000


class CommitThenLose:
    """A retry whose first try commits and then loses its answer (a cut-off connection): the work
    runs, ``on_lost`` hears of it, and the work runs again, as ``TransientRetry`` would do it."""

    def __init__(self) -> None:
        self.armed = False

    def __call__(self, fn: Callable[[], Any], on_lost: Callable[[], None] | None = None) -> Any:
        if not self.armed:
            return fn()
        self.armed = False
        fn()
        assert on_lost is not None, "a write that cannot tell its own earlier success must hear of the loss"
        on_lost()
        return fn()


@pytest.fixture
def lossy(tmp_path) -> Iterator[tuple[SqlAlchemyBatchStore, CommitThenLose]]:
    engine = make_engine(f"sqlite:///{tmp_path / 'tasks.db'}")
    upgrade_schema(engine)
    retry = CommitThenLose()
    yield SqlAlchemyBatchStore(engine, retry=retry), retry  # type: ignore[arg-type]
    engine.dispose()


def test_an_open_that_landed_is_recognised_not_refused(lossy):
    store, retry = lossy
    retry.armed = True
    batch = store.open("r" * 32, "gpt", [(1, 1), (2, 1)], T0)
    assert batch.members == (BatchMember(1, 1), BatchMember(2, 1))
    assert store.get("r" * 32) == batch


def test_a_move_that_landed_is_reported_as_landed(lossy):
    store, retry = lossy
    store.open("r" * 32, "gpt", [(1, 1)], T0)
    retry.armed = True
    assert store.advance("r" * 32, OPEN, UPLOADED, T0 + 1, input_file_id="file-1")
    assert store.get("r" * 32).state is UPLOADED


def test_a_move_a_racer_made_is_not_taken_for_ours(lossy):
    store, retry = lossy
    store.open("r" * 32, "gpt", [(1, 1)], T0)
    assert store.advance("r" * 32, OPEN, UPLOADED, T0 + 1, input_file_id="theirs")
    retry.armed = True  # our try from OPEN finds UPLOADED with another file: not ours
    assert not store.advance("r" * 32, OPEN, UPLOADED, T0 + 2, input_file_id="ours")
    assert store.get("r" * 32).input_file_id == "theirs"
