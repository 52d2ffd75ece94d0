"""A task's rubric through the services, over the in-memory adapters: the producer checks it
before writing anything, the worker hands it to the reviewer and records it on the report, and
a rubric gone by the time the task runs fails that task with a reason (its row kept)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from dependency_injector import providers

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.adapters.offline.slow_reviewer import SlowReviewer
from docllm.adapters.rubrics.parse import parse_rubric
from docllm.adapters.telemetry.metrics import Metrics, TimedReviewer
from docllm.container import Container
from docllm.domain.errors import RubricError
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.settings import Settings
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository
from tests.support.memory.rubrics import InMemoryRubricCatalog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "rubrics"
GUIDE = parse_rubric((EXAMPLES / "install-guide.yaml").read_text(), "install-guide.yaml", "install-guide")
GOLDEN = (EXAMPLES / "golden" / "acmedb-install.md").read_text()


@pytest.fixture
def world():
    clock = ManualClock()
    return InMemoryTaskQueue(clock), InMemoryTaskRepository(clock), clock


def run_one(world, rubrics) -> None:
    queue, repo, clock = world
    proc = TaskProcessor(queue, repo, OfflineReviewer(), clock, RetryPolicy(), LeasePolicy(), "w1", rubrics=rubrics)
    delivery = proc.claim()
    assert delivery is not None
    attempt = proc.begin(delivery)
    assert attempt is not None and proc.finish(attempt, asyncio.run(proc.review(attempt)))


@pytest.mark.parametrize("catalog", [InMemoryRubricCatalog(GUIDE), None], ids=["unknown", "no catalog"])
def test_an_unknown_rubric_at_submit_writes_and_queues_nothing(world, catalog):
    queue, repo, _ = world
    with pytest.raises(RubricError, match="install-guides"):
        submit(repo, queue, "guide.md", GOLDEN, rubric="install-guides", rubrics=catalog)
    assert repo.recent() == [] and queue.stats().ready == 0


def test_the_worker_reviews_with_the_tasks_rubric_and_records_it(world):
    queue, repo, _ = world
    catalog = InMemoryRubricCatalog(GUIDE)
    task = submit(repo, queue, "acmedb-install.md", GOLDEN, rubric="install-guide", rubrics=catalog)
    assert repo.get(task.task_id).rubric == "install-guide"
    run_one(world, catalog)
    report = repo.get(task.task_id).result
    assert report["rubric"] == "install-guide@1"
    assert {f.get("check") for f in report["findings"]} == {
        "rubric:install-guide/sections",
        "rubric:install-guide/product-names",
        "rubric:install-guide/preferred-terms",
        "rubric:install-guide/banned-terms",
    }


def test_a_task_without_a_rubric_is_reviewed_as_before(world):
    queue, repo, _ = world
    task = submit(repo, queue, "acmedb-install.md", GOLDEN)
    run_one(world, None)
    row = repo.get(task.task_id)
    assert row.rubric is None and "rubric" not in row.result
    assert row.result == OfflineReviewer().review_now("acmedb-install.md", GOLDEN)


def test_a_rubric_gone_when_the_task_runs_fails_the_task_and_says_why(world):
    queue, repo, _ = world
    task = submit(repo, queue, "guide.md", GOLDEN, rubric="install-guide", rubrics=InMemoryRubricCatalog(GUIDE))
    run_one(world, InMemoryRubricCatalog())  # this worker's directory lacks it
    row = repo.get(task.task_id)
    assert row.status is TaskStatus.failed and "no rubric 'install-guide'" in row.error
    assert row.document == GOLDEN and queue.stats().dead == 1  # kept: `docllm dead retry` after the fix


def test_the_container_gives_the_processor_the_rubrics_of_DOCLLM_RUBRICS_DIR():
    clock = ManualClock()
    c = Container()
    c.settings.override(providers.Object(Settings.from_env({"DOCLLM_RUBRICS_DIR": str(EXAMPLES)})))
    c.clock.override(providers.Object(clock))
    c.queue.override(providers.Object(InMemoryTaskQueue(clock)))
    c.repository.override(providers.Object(InMemoryTaskRepository(clock)))
    proc = c.processor()
    assert proc.rubrics is c.rubrics() and proc.rubrics.get("install-guide").ref == "install-guide@1"


@pytest.mark.parametrize(
    "wrap", [lambda r: TimedReviewer(r, Metrics()), lambda r: SlowReviewer(r, 0)], ids=["timed", "slow"]
)
def test_the_reviewers_wrappers_pass_the_rubric_on(wrap):
    report = asyncio.run(wrap(OfflineReviewer()).review("acmedb-install.md", GOLDEN, GUIDE))
    assert "rubric:install-guide/banned-terms" in {f.get("check") for f in report["findings"]}
