"""The batch lane (issue 28) end to end inside one process: the container's batcher and poller on
a real redis-server and SQLite, against the test server's Files and Batch APIs with the real
``openai`` client. Some tests run the whole ``Service`` (its loops in threads, as ``docllm
worker`` runs them); the races and crashes drive the batcher's and the poller's steps by hand.
Waits derive from the settings below and leave wide margins (a busy 2-core CI)."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

from docllm.adapters.sql.migrations import upgrade_schema
from docllm.domain import events as ev
from docllm.domain.batches.members import member_attempts
from docllm.domain.batches.model import BatchState
from docllm.domain.errors import ProviderUnavailable
from docllm.domain.tasks.cancel import Canceller
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.outcome import CANCELLED_ERROR
from docllm.domain.tasks.producer import submit
from docllm.entrypoints.bootstrap import build_container, build_service, prepare_schema
from docllm.settings import Settings
from tests.support.llm_server import FakeLLM

DELAY = 0.5  # a batch's run at the test server
PRICES = "test-model=1000/4000"  # USD per 1M tokens: the batch price is 500/2000
DOC = "# Release checklist\n\nShip it on Friday.\n"
WAIT = 60.0  # the most any scenario below may take


class Recorded:
    """Every event, and the successes per task (a task committed twice would show twice)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.succeeded: collections.Counter[int] = collections.Counter()

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))
        if event == ev.SUCCEEDED:
            self.succeeded[int(fields["task_id"])] += 1


def make_settings(tmp_path: Path, redis_url: str, llm: FakeLLM, database_url: str = "", **over: Any) -> Settings:
    values: dict[str, Any] = dict(
        home=str(tmp_path),
        redis_url=redis_url,
        database_url=database_url or f"sqlite:///{tmp_path}/docllm.db",
        queue_prefix="{docllm}",
        llm_provider="openai",
        llm_base_url=llm.base_url,
        llm_api_key="sk-test",
        llm_model="test-model",
        llm_prices=PRICES,
        llm_timeout_seconds=10,
        llm_batch=True,
        batch_max_tasks=5,
        batch_max_wait_seconds=0.3,
        batch_poll_seconds=0.2,
        lease_seconds=3,
        reaper_interval_seconds=0.2,
        retry_base_seconds=0.05,
        retry_max_seconds=0.2,
        concurrency=2,
        store_linger_ms=0,
        worker_id="w1",
        breaker_min_calls=1000,  # the realtime breaker stays out of these scenarios
    )
    values.update(over)
    settings = Settings(**values)
    settings.validate()
    return settings


class Rig:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.container = build_container(settings, log=False)
        self.events = Recorded()
        self.container.events.override(providers.Object(self.events))
        if settings.database_url.startswith("sqlite"):
            prepare_schema(self.container)
        else:  # what `docllm init-db` does
            upgrade_schema(self.container.engine())
        self.repo, self.queue, self.store = (
            self.container.repository(),
            self.container.queue(),
            self.container.batch_store(),
        )

    def submit(self, n: int, priority: str = "bulk", doc: Callable[[int], str] = lambda i: DOC) -> list[int]:
        return [submit(self.repo, self.queue, f"d{i}.md", doc(i), priority=priority).task_id for i in range(n)]

    def rows(self, ids: list[int]) -> list[Task]:
        return [self.repo.get(i) for i in ids]

    def until(self, done: Callable[[], bool], timeout: float = WAIT, step: Callable[[], Any] | None = None) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if step is not None:
                step()
            if done():
                return
            time.sleep(0.05)
        raise AssertionError(f"not done within {timeout} s")

    def finished(self, ids: list[int]) -> Callable[[], bool]:
        return lambda: all(r.status in (TaskStatus.success, TaskStatus.failed) for r in self.rows(ids))

    def batches(self) -> list[Any]:
        return self.store.recent(100)


@pytest.fixture
def rig_for(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., tuple[Rig, FakeLLM]]]:
    servers: list[FakeLLM] = []

    def make(database_url: str = "", llm_options: dict[str, Any] | None = None, **over: Any) -> tuple[Rig, FakeLLM]:
        llm = FakeLLM(**{"batch_delay_s": DELAY, **(llm_options or {})}).start()
        servers.append(llm)
        return Rig(make_settings(tmp_path, redis_url, llm, database_url, **over)), llm

    yield make
    for llm in servers:
        llm.stop()


def running(rig: Rig) -> Any:
    return build_service(rig.container).start()


def run_until_finished(rig: Rig, ids: list[int]) -> None:
    """The whole service runs until every task of ``ids`` has ended, then stops."""
    service = running(rig)
    try:
        rig.until(rig.finished(ids))
    finally:
        assert service.wait(30)


def batch_cost(task: Task) -> float:
    usage = task.usage
    assert usage is not None
    return (usage.prompt_tokens * 500 + usage.completion_tokens * 2000) / 1e6


# -- the whole service ------------------------------------------------------------------------------


def test_bulk_tasks_go_by_batch_at_half_price_and_interactive_ones_stay_realtime(rig_for):
    rig, llm = rig_for()
    bulk, interactive = rig.submit(12), rig.submit(3, priority="interactive")
    service = running(rig)
    try:
        rig.until(rig.finished(bulk + interactive))
    finally:
        assert service.wait(30)
    for row in rig.rows(bulk + interactive):
        assert row.status is TaskStatus.success, row.error
        # Never charged. Not always in one attempt: on a stalled host the 0.2 s batch lease these
        # settings give can lapse, and the reaper then hands a member back uncharged (counted).
        assert row.retry_count == 0, (row.attempt, row.handbacks)
        assert rig.events.succeeded[row.task_id] == 1  # committed once
    for row in rig.rows(bulk):
        assert rig.store.of_task(row.task_id), "a bulk task went by batch"
        assert row.usage is not None and row.usage.cost_usd == pytest.approx(batch_cost(row))
        assert row.result["deployments"] == ["default"]  # the deployment that served it, recorded
    for row in rig.rows(interactive):
        assert not rig.store.of_task(row.task_id), "an interactive task stayed realtime"
        assert row.usage is not None and row.usage.cost_usd == pytest.approx(2 * batch_cost(row))  # full price
    batches = rig.batches()
    # 12 tasks, 5 a batch; all applied unless a stall lapsed a member (then it went again by another)
    assert len(batches) >= 3 and all(b.state.terminal for b in batches)
    applied = [b for b in batches if b.state is BatchState.applied]
    assert sum(b.tasks for b in applied) >= 12
    # A batch's cost is what all its lines cost: a member that lapsed and went again by another
    # batch was billed in both, so the batches may cost more than the rows, never less.
    cost, rows_cost = sum(b.cost_usd or 0 for b in applied), sum(batch_cost(r) for r in rig.rows(bulk))
    if sum(b.tasks for b in applied) == 12:
        assert cost == pytest.approx(rows_cost)
    else:
        assert cost >= rows_cost - 1e-9
    assert llm.batches.counters["batches_created"] == len([b for b in batches if b.batch_id])


def test_failed_lines_are_handed_back_and_succeed_later_and_a_poisoned_document_fails(rig_for):
    rig, llm = rig_for(llm_options={"batch_fail_rate": 0.15, "poison_marker": "POISON", "seed": 3})
    ids = rig.submit(20, doc=lambda i: DOC + ("POISON\n" if i == 4 else ""))
    run_until_finished(rig, ids)
    assert llm.batches.counters["batch_lines_failed"] > 1, "no line failed: the test proves nothing"
    rows = rig.rows(ids)
    poisoned = rows[4]
    assert poisoned.status is TaskStatus.failed and "(400): poisoned document" in (poisoned.error or "").lower()
    others = [r for r in rows if r is not poisoned]
    assert all(r.status is TaskStatus.success for r in others), [r.error for r in others]
    assert all(r.retry_count == 0 for r in others)  # a 500 is handed back, not charged
    assert any(r.handbacks > 0 for r in others)  # ... counted towards its bound (I12)
    assert all(rig.events.succeeded[r.task_id] == 1 for r in others)


@pytest.mark.parametrize("knob", ["expire_batches", "lose_files"])
def test_an_expired_batch_or_a_lost_file_hands_its_tasks_back_uncharged_and_they_succeed_later(rig_for, knob):
    rig, llm = rig_for(llm_options={knob: 1})
    ids = rig.submit(5)
    run_until_finished(rig, ids)
    for row in rig.rows(ids):
        assert row.status is TaskStatus.success, row.error
        # The first attempt cost nothing; its batch's end counts towards the task's bound (issue 43)
        assert (row.attempt, row.retry_count, row.handbacks) == (2, 0, 1)
        assert rig.events.succeeded[row.task_id] == 1
    states = collections.Counter(b.state for b in rig.batches())
    assert states == {BatchState.returned: 1, BatchState.applied: 1}
    if knob == "lose_files":
        assert llm.batches.counters["content_lost"] >= 1


# -- races and crashes, step by step ----------------------------------------------------------------


def submitted_batch(rig: Rig, ids: list[int]) -> str:
    """The batcher's steps until it sent one batch of ``ids`` (they fill it: batch_max_tasks)."""
    batcher = rig.container.batcher()
    rig.until(lambda: bool(rig.batches()), step=batcher.step)
    [batch] = rig.batches()
    assert batch.tasks == len(ids)
    return batch.ref


def two_pollers_on_a_completed_batch(rig: Any, n: int = 5) -> tuple[list[int], str, Any, Any, Any, Any]:
    """``n`` tasks in one batch the provider completed, two pollers, and what the provider says of
    it: (ids, ref, batch, first, second, seen)."""
    ids = rig.submit(n)
    ref = submitted_batch(rig, ids)
    first, second = rig.container.batch_poller(), rig.container.batch_poller()
    batch = rig.store.get(ref)
    assert batch is not None and batch.batch_id is not None
    rig.until(lambda: first.api.retrieve(batch.batch_id).status == "completed")
    return ids, ref, batch, first, second, first.api.retrieve(batch.batch_id)


def test_two_pollers_and_a_file_read_twice_commit_each_task_once(rig_for, monkeypatch):
    rig, llm = rig_for()
    # Both read the completed batch before either writes (the lease expired under the first one).
    ids, ref, batch, first, second, seen = two_pollers_on_a_completed_batch(rig)
    mine, theirs = member_attempts(first.proc, batch.members), member_attempts(second.proc, batch.members)
    token = first.leases.acquire(ref, "first", 60_000)
    assert token is not None
    second._apply(batch, seen, theirs, "a lease it lost")  # stops before its first finish
    assert {row.status for row in rig.rows(ids)} == {TaskStatus.processing}
    first._apply(batch, seen, mine, token)
    # One that believes it still holds the lease (a clock step ended it early) applies the same
    # files again, the same attempts: the fences alone keep each row committed once.
    monkeypatch.setattr(type(second.leases), "renew", lambda *args, **kwargs: True)
    second._apply(batch, seen, theirs, "a lease it lost")
    monkeypatch.undo()
    first.leases.release(ref, token)
    first.poll(ref)  # and a poller that comes later finds it applied
    for row in rig.rows(ids):
        assert row.status is TaskStatus.success and row.attempt == 1
        assert row.usage is not None and row.usage.calls == 1  # one commit's usage, not two
    assert llm.batches.counters["content_reads"] == 3  # three times, and applied once
    assert rig.store.get(ref).state is BatchState.applied


class LapsesAfter:
    """A poller's batch lease that holds for ``n`` renewals, then is lost (a stalled host)."""

    def __init__(self, leases: Any, n: int):
        self.leases, self.left = leases, n

    def renew(self, *args: Any) -> bool:
        self.left -= 1
        return self.left >= 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.leases, name)


def test_a_batch_applied_by_two_pollers_costs_what_all_its_lines_cost(rig_for):
    """The first poller's lease lapses after two finishes; the one that takes the batch over
    applies the other three, and the batch records what all five members' lines cost."""
    rig, llm = rig_for()
    ids, ref, batch, first, second, seen = two_pollers_on_a_completed_batch(rig)
    first.leases = LapsesAfter(first.leases, 2)
    first._apply(batch, seen, member_attempts(first.proc, batch.members), "a lease that lapses")
    assert sorted(row.status.value for row in rig.rows(ids)) == ["processing"] * 3 + ["success"] * 2
    token = second.leases.acquire(ref, "second", 60_000)
    assert token is not None
    second._apply(batch, seen, member_attempts(second.proc, batch.members), token)
    rows = rig.rows(ids)
    assert {row.status for row in rows} == {TaskStatus.success}
    applied = rig.store.get(ref)
    assert applied is not None and applied.state is BatchState.applied
    assert applied.cost_usd == pytest.approx(sum(batch_cost(r) for r in rows))


def test_a_member_whose_lease_lapsed_is_left_to_the_reaper_before_its_batch_ends_and_is_never_charged(rig_for):
    rig, llm = rig_for()
    ids = rig.submit(5)
    ref = submitted_batch(rig, ids)
    poller, reaper = rig.container.batch_poller(), rig.container.reaper()
    batch = rig.store.get(ref)
    assert batch is not None and batch.batch_id is not None
    rig.until(lambda: poller.api.retrieve(batch.batch_id).status == "completed")
    lapsed = rig.repo.get(ids[0])
    assert lapsed.lease_token is not None
    rig.queue.extend_many([lapsed.lease_token], 1)  # nobody polled in time: its lease runs out
    time.sleep(0.05)
    poller.step()  # before the reaper came: the batch waits (ended now, the reaper would charge it)
    assert rig.store.get(ref).state is BatchState.submitted
    # Hands it back uncharged, its batch still unfinished (its first verdict comes once its clock
    # has read the server for half a lease: ARCHITECTURE.md, Clocks).
    rig.until(lambda: reaper.reap_once() == 1)
    batcher = rig.container.batcher()
    rig.until(rig.finished(ids), step=lambda: (poller.step(), batcher.step()))
    for row in rig.rows(ids):
        assert row.status is TaskStatus.success and row.retry_count == 0, (row.task_id, row.error)
    assert rig.repo.get(ids[0]).attempt == 2  # it went again, by another batch


class ApiBut:
    """The batch API, but for what a subclass overrides."""

    def __init__(self, api: Any):
        self.api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)


class CreateLost(ApiBut):
    """The batch API, but its create's answer is lost (``created``: the batch is made first)."""

    def __init__(self, api: Any, created: bool):
        super().__init__(api)
        self.created = created

    def create(self, input_file_id: str, ref: str) -> Any:
        if self.created:
            self.api.create(input_file_id, ref)
        raise ProviderUnavailable("the batcher died before the create's answer (test)")


class SlowUpload(ApiBut):
    """The batch API, its upload outlasting the batch lease (a stalled host)."""

    def __init__(self, api: Any, seconds: float):
        super().__init__(api)
        self.seconds = seconds

    def upload(self, data: bytes, name: str) -> str:
        time.sleep(self.seconds)
        return str(self.api.upload(data, name))


def test_a_batcher_whose_lease_lapsed_in_a_slow_upload_that_nobody_took_sends_its_batch(rig_for):
    rig, llm = rig_for()
    ids = rig.submit(5)
    batcher = rig.container.batcher()
    batcher.api = SlowUpload(batcher.api, 3 * rig.settings.batch_lease_seconds)
    rig.until(lambda: bool(rig.batches()), step=batcher.step)
    [batch] = rig.batches()
    # Taken back and sent, not left open for a poller to hand its members back (attempt 2 each)
    assert batch is not None and batch.state is BatchState.submitted and batch.batch_id is not None
    assert llm.batches.counters["batches_created"] == 1
    assert not any(name in (ev.BATCH_ADOPTED, ev.BATCH_RETURNED) for name, _ in rig.events.events)
    rig.until(rig.finished(ids), step=rig.container.batch_poller().step)
    assert all((r.status, r.attempt, r.handbacks) == (TaskStatus.success, 1, 0) for r in rig.rows(ids))


@pytest.mark.parametrize("created", [False, True], ids=["never-created", "created-answer-lost"])
def test_a_batch_left_uploaded_by_a_dead_batcher_is_adopted_once(rig_for, created):
    rig, llm = rig_for()
    ids = rig.submit(5)
    batcher = rig.container.batcher()
    batcher.api = CreateLost(batcher.api, created)
    rig.until(lambda: bool(rig.batches()), step=batcher.step)
    [left] = rig.batches()
    assert left.state is BatchState.uploaded and left.batch_id is None
    poller = rig.container.batch_poller()
    rig.until(rig.finished(ids), step=poller.step)
    assert llm.batches.counters["batches_created"] == 1  # found by its docllm_ref, never made twice
    assert rig.store.get(left.ref).state is BatchState.applied
    assert any(name == ev.BATCH_ADOPTED for name, _ in rig.events.events)
    for row in rig.rows(ids):
        assert row.status is TaskStatus.success and (row.attempt, row.retry_count) == (1, 0)


def test_an_operator_cancel_of_a_task_in_a_batch_fails_it_at_the_next_poll(rig_for):
    rig, llm = rig_for()
    ids = rig.submit(5)
    submitted_batch(rig, ids)
    [cancel] = Canceller(rig.repo, rig.queue).request([ids[2]])
    poller = rig.container.batch_poller()
    rig.until(rig.finished(ids), step=poller.step)
    rows = rig.rows(ids)
    assert rows[2].status is TaskStatus.failed and rows[2].error == CANCELLED_ERROR
    assert all(r.status is TaskStatus.success for i, r in enumerate(rows) if i != 2)
    assert cancel.task_id == ids[2]


def test_the_lane_works_on_mariadb_too(rig_for, mysql_url):
    rig, llm = rig_for(database_url=mysql_url)
    ids = rig.submit(5)
    run_until_finished(rig, ids)
    assert all(r.status is TaskStatus.success and r.retry_count == 0 for r in rig.rows(ids))
    assert BatchState.applied in [b.state for b in rig.batches()]


def test_a_task_over_the_cost_cap_at_batch_prices_fails_before_anything_is_uploaded(rig_for):
    rig, llm = rig_for(batch_max_tasks=2, task_max_cost_usd=3.0)  # one chunk costs about 2 USD at batch prices
    big = "# Part\n\n" + "word " * 12_000  # five chunks or so: about 10 USD
    small_id, big_id = rig.submit(2, doc=lambda i: big if i else DOC)
    rig.until(lambda: bool(rig.batches()), step=rig.container.batcher().step)
    over = rig.repo.get(big_id)
    assert over.status is TaskStatus.failed and over.usage is None  # nothing was sent
    assert "DOCLLM_TASK_MAX_COST_USD=3" in (over.error or "") and "at batch prices" in (over.error or "")
    [batch] = rig.batches()
    assert batch.tasks == 1 and rig.store.of_task(small_id) == [batch.ref] and not rig.store.of_task(big_id)


def test_at_the_spend_cap_the_batcher_claims_nothing(rig_for):
    rig, llm = rig_for(spend_cap_usd_per_day=1.0)
    ids = rig.submit(5)
    budget = rig.container.spend_budget()
    budget.add(2_000_000)  # 2 USD spent today: over the cap (I14)
    batcher = rig.container.batcher()
    for _ in range(3):
        batcher.step()
    assert not rig.batches() and not batcher.held
    assert all(r.status is TaskStatus.pending and r.attempt == 0 for r in rig.rows(ids))
    budget.set_cap(100.0)  # what `docllm budget set --usd 100` does
    rig.until(lambda: bool(rig.batches()), step=batcher.step)


def test_a_batch_past_its_window_is_cancelled_and_its_tasks_handed_back_uncharged(rig_for):
    rig, llm = rig_for(llm_options={"batch_delay_s": 30.0})  # it would run long past the test
    ids = rig.submit(5)
    ref = submitted_batch(rig, ids)
    poller = rig.container.batch_poller()
    poller.bound_ms = 0  # the 24 h window and its margin, passed (I15's bound)
    poller.step()
    assert rig.store.get(ref).state is BatchState.returned
    assert llm.batches.counters["batches_cancelled"] == 1  # no longer paid for
    for row in rig.rows(ids):
        # uncharged, counted towards the task's bound (issue 43)
        assert (row.status, row.attempt, row.retry_count, row.handbacks) == (TaskStatus.pending, 1, 0, 1)


class SteppedClock:
    """The authority clock, stepped ``offset_ms`` (a Redis failover to a primary whose clock is off)."""

    def __init__(self, clock: Any):
        self.clock, self.offset_ms = clock, 0

    def now_ms(self) -> int:
        return self.clock.now_ms() + self.offset_ms


def test_a_poller_whose_clock_stepped_back_an_hour_asks_the_provider_again_at_once(rig_for):
    """Found by the simulation (seed 0 of ``batches``): every poller had asked before the step, so
    none asked again for an hour, and the completed batch stayed unread past I15's bound."""
    rig, llm = rig_for(llm_options={"batch_delay_s": 1.0})
    ids = rig.submit(5)
    submitted_batch(rig, ids)
    poller = rig.container.batch_poller()
    poller.proc.clock = clock = SteppedClock(poller.proc.clock)
    poller.step()  # asked: still running at the provider
    assert not rig.finished(ids)()
    clock.offset_ms = -3_600_000
    rig.until(rig.finished(ids), step=poller.step)
    assert {row.status for row in rig.rows(ids)} == {TaskStatus.success}


def test_a_batcher_whose_clock_stepped_back_an_hour_sends_its_claims_after_its_wait(rig_for):
    """Found with the poller's: claims held for a batch not full went nowhere for an hour."""
    rig, _ = rig_for(batch_max_wait_seconds=0.3)
    rig.submit(2)  # batch_max_tasks 5: never full
    batcher = rig.container.batcher()
    batcher.proc.clock = clock = SteppedClock(batcher.proc.clock)
    rig.until(lambda: len(batcher.held) == 2, step=batcher.step)
    clock.offset_ms = -3_600_000
    rig.until(lambda: bool(rig.batches()), step=batcher.step)
    assert rig.batches()[0].tasks == 2


def test_two_worker_processes_batch_and_poll_the_same_lane_and_commit_each_task_once(rig_for, tmp_path):
    rig, llm = rig_for(batch_max_tasks=4)
    other = Rig(make_settings(tmp_path, rig.settings.redis_url, llm, worker_id="w2", batch_max_tasks=4))
    other.events = rig.events  # one record of both processes' events
    other.container.events.override(providers.Object(rig.events))
    ids = rig.submit(16)
    services = [running(rig), running(other)]
    try:
        rig.until(rig.finished(ids))
    finally:
        assert all(s.wait(30) for s in services)
    for row in rig.rows(ids):  # never charged (a lapsed 0.2 s batch lease on a stalled host is a hand-back)
        assert row.status is TaskStatus.success and row.retry_count == 0, (row.attempt, row.handbacks)
        assert rig.events.succeeded[row.task_id] == 1
    batches = rig.batches()
    assert all(b.state.terminal for b in batches) and sum(b.tasks for b in batches) >= 16
    # Each provider batch is one of docllm's, made once. A batch whose batcher stalled past its lease
    # before the create is adopted by a poller, which may hand its members back: it has no provider
    # batch (a suite run on a loaded host: 6 batches, 5 created).
    assert llm.batches.counters["batches_created"] == len([b for b in batches if b.batch_id])


def test_a_stopping_batcher_puts_the_claims_it_held_back_at_once(rig_for):
    rig, llm = rig_for(batch_max_wait_seconds=600)  # it would wait for a full batch
    ids = rig.submit(3)
    batcher = rig.container.batcher()
    batcher.step()
    assert len(batcher.held) == 3 and not rig.batches()
    assert batcher.release() == 3
    assert all(r.status is TaskStatus.pending and r.attempt == 0 for r in rig.rows(ids))  # never started
    assert len(rig.container.batcher().proc.claim_batch(5, ("bulk",))) == 3  # claimable again, now


class Killed(BaseException):
    """The batcher's process dies here (nothing it would catch)."""


class DiesAtUpload(ApiBut):
    def upload(self, jsonl: bytes, name: str) -> str:
        raise Killed


def test_a_batch_left_open_by_a_batcher_that_died_before_the_upload_hands_its_tasks_back_uncharged(rig_for):
    rig, llm = rig_for()
    ids = rig.submit(5)
    batcher = rig.container.batcher()
    batcher.api = DiesAtUpload(batcher.api)
    with pytest.raises(Killed):
        rig.until(lambda: False, step=batcher.step)
    [left] = rig.batches()
    assert left.state is BatchState.open
    poller = rig.container.batch_poller()
    rig.until(lambda: rig.store.get(left.ref).state is BatchState.returned, step=poller.step)
    for row in rig.rows(ids):
        assert (row.status, row.attempt, row.retry_count, row.handbacks) == (TaskStatus.pending, 1, 0, 0)
    assert llm.batches.counters["batches_created"] == 0
