"""Whose fault it is (issue 22 items 1-3 and 6, ARCHITECTURE.md, Whose fault it is, I9, I12), reproduced as a hostile
user would: the runtime built as production builds it (container, ``build_service``), on a real
redis-server and MariaDB, with the real ``openai`` client talking HTTP to the scripted test server.

1. A batch of poison documents that fail together (opening the fleet's breaker while the check
   passes) still ends ``failed`` within its bounds, instead of being handed back for ever.
(2. A host cut off from the LLM while another is served: tests/e2e/test_llm_host_cut.py.)
3. A provider hold longer than PROCESSING_TIMEOUT_SECONDS charges none of the attempts it holds.
6. A cancelled attempt writes the LLM usage it spent.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dependency_injector import providers

from docllm.adapters.sql.migrations import upgrade_schema
from docllm.container import Container
from docllm.domain.tasks.cancel import Canceller
from docllm.domain.tasks.model import TaskStatus
from docllm.domain.tasks.producer import submit
from docllm.entrypoints.bootstrap import build_service
from docllm.runtime.service import Service
from docllm.settings import Settings
from tests.support.llm_server import FakeLLM, Reply, error

POISON = "POISON-PILL"


class PoisonLLM(FakeLLM):
    """Answers every document but those carrying ``POISON``, which get a 500 (or wait ``hang``
    seconds) every time; ``check()`` (GET /models) always passes."""

    def __init__(self, hang: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.hang = hang

    def answer(self, method: str, path: str, headers: dict[str, str], body: Any) -> Reply:
        if method == "POST" and POISON in json.dumps(body):
            with self._lock:
                self.requests.append({"method": method, "path": path, "headers": headers, "body": body})
            return Reply(status=200, delay=self.hang) if self.hang else error(500, "upstream crashed")
        return super().answer(method, path, headers, body)


@pytest.fixture
def fleet(redis_url: str, mysql_url: str) -> Iterator[Callable[..., Service]]:
    """Services of one fleet (one queue prefix, one database), built as ``docllm worker`` builds them."""
    prefix = f"{{wf{uuid.uuid4().hex[:8]}}}"
    upgrade_schema(mysql_url)
    started: list[Service] = []

    def make(worker_id: str, llm_url: str, **overrides: Any) -> Service:
        values: dict[str, Any] = dict(
            redis_url=redis_url,
            database_url=mysql_url,
            queue_prefix=prefix,
            worker_id=worker_id,
            llm_provider="openai",
            llm_base_url=llm_url,
            llm_api_key="sk-test",
            llm_model="test-model",
            llm_timeout_seconds=2.0,
            lease_seconds=3.0,
            reaper_interval_seconds=0.2,
            retry_base_seconds=0.05,
            retry_max_seconds=0.3,
            shutdown_grace_seconds=0.5,
            breaker_open_seconds=0.5,
            breaker_min_calls=3,
            breaker_window_seconds=10.0,
        )
        settings = Settings(**{**values, **overrides})
        c = Container()
        c.settings.override(providers.Object(settings))
        service = build_service(c, workers=True, reaper=True).start()
        service.container = c  # type: ignore[attr-defined]
        started.append(service)
        return service

    yield make
    for service in started:
        service.request_stop()
    for service in started:
        service.wait()


def _submit(service: Service, n: int, text: str = "Ship it.") -> list[int]:
    c = service.container  # type: ignore[attr-defined]
    return [submit(c.repository(), c.queue(), f"doc{i}.md", f"# Doc {i}\n\n{text} {i}\n").task_id for i in range(n)]


def _rows(service: Service, ids: list[int]) -> list[Any]:
    repo = service.container.repository()  # type: ignore[attr-defined]
    return [repo.get(i) for i in ids]


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"not reached in {timeout:g} s: {what}")


def test_a_poison_batch_that_opens_the_breaker_still_ends_failed_within_its_bounds(fleet):
    """Item 1: six poison documents fail together, the breaker opens, the check passes. Before the
    fix they were handed back as an outage for ever (attempt 16-18, retry_count 0 after 25 s)."""
    with PoisonLLM() as llm:
        service = fleet("w1", llm.base_url, concurrency=6, max_attempts=2, max_handbacks=2)
        poison = _submit(service, 6, text=POISON)
        healthy = _submit(service, 4)
        _until(
            lambda: all(r.status.terminal for r in _rows(service, poison + healthy)),
            60,
            "every poison document failed and every healthy one succeeded",
        )
        for row in _rows(service, poison):
            assert row.status is TaskStatus.failed, row
            assert row.retry_count == 2 and row.handbacks <= 2, row  # the budget, and the bound I12
            assert row.attempt <= 2 + 2 + 1, row  # charged + counted hand-backs (+1 a lease or shutdown may add)
            assert "500" in (row.error or "")
        assert all(r.status is TaskStatus.success and r.retry_count == 0 for r in _rows(service, healthy))
        calls = sum(1 for r in llm.requests if r["method"] == "POST" and POISON in json.dumps(r["body"]))
        assert calls <= 6 * (2 + 2 + 1), calls  # every cycle of the loop paid for calls


def test_a_provider_hold_longer_than_the_runtime_bound_charges_no_attempt(fleet):
    """Item 3: a 429 with Retry-After 4 s holds the fleet (DOCLLM_LLM_RPM on) while
    PROCESSING_TIMEOUT_SECONDS is 1.5 s. Before the fix every attempt waiting on the hold timed
    out and was charged; now the wait is not the document's."""
    with FakeLLM(latency_ms=(50, 100)) as llm:
        llm.script(error(429, "Rate limit reached.", retry_after="4"))
        service = fleet(
            "w1", llm.base_url, concurrency=4, llm_rpm=6000, processing_timeout_seconds=1.5, max_handbacks=3
        )
        ids = _submit(service, 6)
        _until(lambda: all(r.status.terminal for r in _rows(service, ids)), 60, "every task finished")
        rows = _rows(service, ids)
        assert all(r.status is TaskStatus.success and r.retry_count == 0 for r in rows), rows
        held = [r for r in llm.requests if r["method"] == "POST"]
        assert len(held) >= 6


def test_a_cancelled_attempt_writes_the_usage_it_spent(fleet):
    """Item 6: a chunked review cancelled mid-way has paid for its first calls; the row says so."""
    with PoisonLLM(hang=30) as llm:
        service = fleet(
            "w1",
            llm.base_url,
            concurrency=1,
            llm_max_chunk_chars=200,
            llm_chunk_parallelism=1,
            llm_timeout_seconds=60.0,
            processing_timeout_seconds=120.0,
        )
        long_doc = "\n\n".join(f"## Part {i}\n\n" + "Plain words here. " * 8 for i in range(6)) + f"\n\n{POISON}\n"
        c = service.container
        task = submit(c.repository(), c.queue(), "long.md", long_doc)
        _until(
            lambda: any(POISON in json.dumps(r["body"]) for r in list(llm.requests)),
            30,
            "the review reached its hanging chunk",
        )
        Canceller(c.repository(), c.queue()).request([task.task_id])
        _until(lambda: c.repository().get(task.task_id).status.terminal, 30, "the cancel stopped the attempt")
        row = c.repository().get(task.task_id)
        assert row.status is TaskStatus.failed and row.error == "cancelled by operator"
        assert row.usage is not None and row.usage.calls >= 1, row.usage
