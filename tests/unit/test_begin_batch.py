"""A claimed batch starts as one store group (``TaskProcessor.begin_batch``, issue 31): one
transaction for all of its rows, each fenced on its own, and each delivery then settled as a lone
one would be; one delivery's trouble never strands the others."""

from __future__ import annotations

import itertools

from docllm.domain import events as ev
from docllm.domain.errors import Unavailable
from docllm.domain.events import RecordingEvents
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Attempt, TaskStatus
from docllm.domain.tasks.payload import make_payload
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository

LEASE = LeasePolicy(lease_seconds=30, max_runtime_seconds=120, reaper_interval_seconds=5)


class CountingStore(InMemoryTaskRepository):
    """The memory store, counting its groups; ``fail_groups`` of them raise before writing."""

    def __init__(self, clock):
        super().__init__(clock)
        self.groups: list[tuple[int, int]] = []
        self.fail_groups = 0

    def write_group(self, writes, starts=()):
        if self.fail_groups:
            self.fail_groups -= 1
            raise Unavailable("database down (test)")
        self.groups.append((len(writes), len(starts)))
        return super().write_group(writes, starts)


class AckFailsOnce(InMemoryTaskQueue):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_ack = False

    def ack(self, token):
        if self.fail_ack:
            self.fail_ack = False
            raise Unavailable("redis down (test)")
        return super().ack(token)


class Reviewer:
    name = "stub"

    async def review(self, task_name, document):
        return {"findings": [], "summary": "ok", "reviewer": "offline"}

    async def check(self):
        pass


def rig():
    clock = ManualClock()
    tokens = itertools.count(1)
    queue = AckFailsOnce(clock, token_factory=lambda: f"t{next(tokens)}")
    store = CountingStore(clock)
    events = RecordingEvents()
    proc = TaskProcessor(queue, store, Reviewer(), clock, RetryPolicy(max_attempts=3), LEASE, "w1", events=events)
    return queue, store, events, proc


def test_a_batch_of_four_starts_in_one_group_and_settles_each_delivery():
    queue, store, events, proc = rig()
    tasks = [submit(store, queue, f"d{i}.md", "# T\n\ntext\n") for i in range(3)]
    done = store.start_attempt(tasks[2].task_id, "other").task
    store.commit(done.task_id, done.attempt, {"ok": True})
    queue.push("not json {{{")  # malformed: dead-lettered before the group
    queue.push(make_payload(10_000, "gone.md"))  # no such row: dead-lettered after it
    store.groups.clear()
    found = proc.claim_batch(10)
    assert len(found) == 5
    begun = proc.begin_batch(found)
    assert store.groups == [(0, 4)]  # one group: four starts (the malformed payload has no row)
    started = [b for b in begun if isinstance(b, Attempt)]
    assert sorted(a.task_id for a in started) == [tasks[0].task_id, tasks[1].task_id]
    assert all(store.get(a.task_id).status is TaskStatus.processing for a in started)
    assert begun.count(None) == 3  # the finished row's duplicate, the malformed and the unknown
    assert len(queue.dead_letters()) == 2
    assert events.names().count(ev.DUPLICATE) == 1


def test_a_failed_group_starts_no_row_and_reports_each_delivery_unavailable():
    queue, store, events, proc = rig()
    tasks = [submit(store, queue, f"d{i}.md", "# T\n\ntext\n") for i in range(3)]
    store.fail_groups = 1
    begun = proc.begin_batch(proc.claim_batch(10))
    assert len(begun) == 3 and all(isinstance(b, Unavailable) for b in begun)
    assert all(store.get(t.task_id).status is TaskStatus.pending for t in tasks)


def test_one_deliverys_trouble_after_the_group_leaves_the_others_started():
    queue, store, events, proc = rig()
    first = submit(store, queue, "a.md", "# T\n\ntext\n")
    done = store.start_attempt(first.task_id, "other").task
    store.commit(done.task_id, done.attempt, {"ok": True})
    submit(store, queue, "b.md", "# T\n\ntext\n")
    queue.fail_ack = True  # acking the finished row's duplicate fails
    begun = proc.begin_batch(proc.claim_batch(10))
    assert isinstance(begun[0], Unavailable)
    assert isinstance(begun[1], Attempt) and begun[1].task.task_name == "b.md"


def test_begin_is_a_batch_of_one():
    queue, store, events, proc = rig()
    task = submit(store, queue, "a.md", "# T\n\ntext\n")
    store.groups.clear()
    attempt = proc.begin(proc.claim())
    assert attempt is not None and attempt.task_id == task.task_id
    assert store.groups == [(0, 1)]
