"""Provider batch gauges (adapters/telemetry/batch_metrics.py): every state a series, the tasks
of unfinished batches, one store read per interval, nothing (not an error) while the store is down."""

from __future__ import annotations

from prometheus_client import generate_latest

from docllm.adapters.telemetry.batch_metrics import BatchGauges
from docllm.adapters.telemetry.metrics import Metrics
from docllm.domain.batches.model import BatchState
from docllm.domain.errors import Unavailable
from tests.support.memory.batches import InMemoryBatchStore
from tests.unit.test_lane_metrics import samples

OPEN, UPLOADED, SUBMITTED, APPLIED, RETURNED = BatchState
T0 = 1_700_000_000_000


def store_of_three() -> InMemoryBatchStore:
    store = InMemoryBatchStore()
    store.open("a" * 32, "gpt", [(1, 1), (2, 1), (3, 1)], T0)
    store.open("b" * 32, "gpt", [(4, 1)], T0 + 1)
    assert store.advance("b" * 32, OPEN, SUBMITTED, T0 + 2, batch_id="batch_b")
    store.open("c" * 32, "gpt", [(5, 1), (6, 1)], T0 + 3)
    assert store.advance("c" * 32, OPEN, RETURNED, T0 + 4)
    return store


def test_batches_per_state_and_the_tasks_of_unfinished_ones_are_gauges():
    got = samples(BatchGauges(store_of_three().counts))
    per_state = {dict(k[1])["state"]: v for k, v in got.items() if k[0] == "docllm_llm_batches"}
    assert per_state == {"open": 1, "uploaded": 0, "submitted": 1, "applied": 0, "returned": 1}
    assert got[("docllm_llm_batch_tasks_unfinished", ())] == 4  # 3 open + 1 submitted; the returned 2 not


def test_one_read_serves_the_scrapes_of_an_interval_and_a_failed_read_shows_nothing():
    store, now, reads, down = store_of_three(), [0.0], [], [False]

    def read():
        reads.append(now[0])
        if down[0]:
            raise Unavailable("database down")
        return store.counts()

    gauges = BatchGauges(read, every_s=15.0, clock=lambda: now[0])
    for t in (0.0, 7.0, 14.9):
        now[0] = t
        assert samples(gauges)
    assert reads == [0.0]
    now[0], down[0] = 15.0, True
    assert samples(gauges) == {}
    now[0], down[0] = 16.0, False
    assert samples(gauges)[("docllm_llm_batch_tasks_unfinished", ())] == 4
    assert reads == [0.0, 15.0, 16.0]


def test_metrics_watch_batches_reads_the_store():
    metrics = Metrics()
    metrics.watch_batches(store_of_three())
    text = generate_latest(metrics.registry).decode()
    assert 'docllm_llm_batches{state="submitted"} 1.0' in text and "docllm_llm_batch_tasks_unfinished 4.0" in text
