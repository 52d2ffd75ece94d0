"""The worker with the real ``openai`` client over HTTP against the scripted test server:
retryable LLM failures end in success with the LLM's findings, and a 401 fails no task."""

from __future__ import annotations

import asyncio
import logging
import time

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.domain.llm.breaker import BreakerPolicy
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from docllm.domain.tasks.reaper import Reaper
from docllm.runtime.llm_gate import LlmGate
from docllm.runtime.port_calls import ThreadedPortCalls
from docllm.runtime.worker import Worker
from tests.support.llm_server import FakeLLM, Reply, error
from tests.support.memory.breaker import InMemoryLlmBreaker
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository
from tests.support.runtime_rig import RealClock

DOC = "# Release checklist\n\nShip it.\n"


def run_worker(llm: FakeLLM, until, timeout: float = 20.0):
    clock = RealClock()
    queue, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository()
    reviewer = OpenAIReviewer(llm.base_url, "sk-test", "test-model", timeout_seconds=5)
    retry = RetryPolicy(max_attempts=5, max_handbacks=1, base_seconds=0.05, cap_seconds=0.2)
    lease = LeasePolicy(lease_seconds=2, max_runtime_seconds=30, reaper_interval_seconds=0.1)
    task = submit(repo, queue, "checklist.md", DOC)
    calls = ThreadedPortCalls(4)
    breaker = InMemoryLlmBreaker(clock, BreakerPolicy(min_calls=100, open_seconds=0.5))  # one task: the checks decide
    gate = LlmGate(reviewer, breaker, calls, "w1", logging.getLogger("test"), base=0.05, cap=0.2)
    worker = Worker(
        TaskProcessor(queue, repo, reviewer, clock, retry, lease, "w1"), calls, gate, 1, idle_wait_seconds=0.05
    )
    reaper = Reaper(queue, repo, retry)

    async def main():
        running = asyncio.create_task(worker.run())
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end and not await until(repo.get(task.task_id), gate):
                reaper.reap_once()  # moves the delayed retries back to ready
                await asyncio.sleep(0.02)
            return repo.get(task.task_id), gate
        finally:
            worker.stop(0)
            await asyncio.wait_for(running, 5)
            calls.close()

    return asyncio.run(main())


def test_500s_then_success_ends_success_with_the_llms_findings():
    with FakeLLM() as llm:
        # The review's 500 and the check's: the provider's (an outage: handed back, not counted);
        # the recheck passes; then a review's 500 while the check passes: handed back, counted
        # (one of DOCLLM_MAX_HANDBACKS=1); the next such 500 is the document's (charged).
        e500 = error(500, "upstream overloaded")
        llm.script(e500, e500, Reply(), e500, Reply(), e500, Reply())

        async def until(row, gate):
            return row.status.terminal

        row, _ = run_worker(llm, until)
    assert row.status is TaskStatus.success
    assert (row.retry_count, row.handbacks, row.attempt) == (1, 1, 4)
    assert row.result["reviewer"] == "openai" and row.result["model"] == "test-model"
    assert any("Release checklist" in (f.get("quote") or "") for f in row.result["findings"])


def test_a_401_fails_no_task_and_the_worker_resumes_when_the_key_works():
    seen = []

    async def until(row, gate):
        if not gate.open and row.status is not TaskStatus.processing and not seen:  # its release written
            seen.append((row.status, row.retry_count))  # stopped claiming; the task kept its budget
            await asyncio.sleep(0.3)
            llm.unauthorized = False  # the operator fixes the key; the same worker must resume
        return row.status.terminal

    with FakeLLM(unauthorized=True) as llm:
        row, gate = run_worker(llm, until)
    assert seen == [(TaskStatus.pending, 0)]
    assert row.status is TaskStatus.success and gate.open
