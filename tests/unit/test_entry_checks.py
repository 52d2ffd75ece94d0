"""Values checked at every entry (issue 44): the Python API refuses a lane or tenant the claim would
refuse, with nothing written; a raw payload whose lane or tenant no claim takes fails its pending
row with the reason (dead-lettered under its task id), so the reconciler has nothing to push again;
a payload refused for another reason (over the size limit) leaves its row to the reconciler."""

from __future__ import annotations

import itertools
import json

import pytest

from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.policies import LeasePolicy, Limits, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reconciler import Reconciler
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

LEASE = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)


def rig(
    max_payload_bytes: int = 65_536,
) -> tuple[ManualClock, InMemoryTaskQueue, InMemoryTaskRepository, TaskProcessor]:
    clock = ManualClock()
    tokens = itertools.count(1)
    queue = InMemoryTaskQueue(clock, token_factory=lambda: f"t{next(tokens)}")
    repo = InMemoryTaskRepository(clock)
    limits = Limits(max_payload_bytes=max_payload_bytes)
    proc = TaskProcessor(queue, repo, None, clock, RetryPolicy(), LEASE, "w1", limits=limits)  # type: ignore[arg-type]
    return clock, queue, repo, proc


@pytest.mark.parametrize(
    ("priority", "tenant"), [("", None), ("urgent", None), (None, ""), (None, "a|b"), ("default", " acme")]
)
def test_the_python_api_refuses_a_lane_or_tenant_the_claim_would_refuse(priority, tenant):
    _, queue, repo, _ = rig()
    with pytest.raises(ValueError, match="priority must be|tenant must be"):
        submit(repo, queue, "a.md", "# T\n", priority=priority, tenant=tenant)
    assert repo.counts() == {s: 0 for s in repo.counts()} and queue.claim_batch("w", 1000, 10) == []


def test_a_raw_payload_with_a_bad_lane_fails_its_row_with_the_reason_and_is_not_pushed_again():
    clock, queue, repo, proc = rig()
    row = repo.create("raw.md", "# T\n")  # a producer's own INSERT, then its LPUSH
    queue.push(json.dumps({"task_id": row.task_id, "task_name": "raw.md", "priority": "urgent"}))
    assert proc.begin_batch(proc.claim_batch(10)) == [None]
    failed = repo.get(row.task_id)
    assert failed is not None and failed.status is TaskStatus.failed
    assert failed.error is not None and "priority must be one of" in failed.error
    [letter] = queue.dead_letters()
    assert letter.task_id == row.task_id  # ``docllm dead retry`` reopens it, with the row's own payload
    clock.advance(3_600_000)
    reconciler = Reconciler(queue, repo, clock, grace_ms=1_000)
    for _ in range(3):
        reconciler.reconcile_once()
        clock.advance(10_000)
    assert queue.claim_batch("w", 1000, 10) == []  # nothing pushed again


def test_a_row_written_with_an_empty_lane_ends_failed_at_its_first_claim():
    """A row an older API let through (``priority=""``): its own payload is refused by the claim."""
    _, queue, repo, proc = rig()
    row = repo.create("old.md", "# T\n", priority="")
    queue.push(make_payload(row.task_id, "old.md", priority=""))
    proc.begin_batch(proc.claim_batch(10))
    failed = repo.get(row.task_id)
    assert failed is not None and failed.status is TaskStatus.failed


def test_a_payload_refused_for_its_size_leaves_its_row_to_the_reconciler():
    _, queue, repo, proc = rig(max_payload_bytes=200)
    row = repo.create("big.md", "# T\n")
    queue.push(json.dumps({"task_id": row.task_id, "padding": "x" * 500}))
    proc.begin_batch(proc.claim_batch(10))
    kept = repo.get(row.task_id)
    assert kept is not None and kept.status is TaskStatus.pending  # its own payload is claimable
    assert len(queue.dead_letters()) == 1


@pytest.mark.parametrize(("name", "document"), [("a\ud800.md", "# T\n"), ("a.md", "# T\n\udfff\n")])
def test_the_python_api_refuses_a_name_or_document_no_utf8_column_stores(name, document):
    _, queue, repo, _ = rig()
    with pytest.raises(ValueError, match="no UTF-8 column stores"):
        submit(repo, queue, name, document)
    assert sum(repo.counts().values()) == 0
