"""Fixtures of the end-to-end tests: a harness of real docllm processes on the real servers.

- ``harness``: a :class:`~tests.e2e.harness.Harness` on ``redis_url`` and ``mysql_url`` with a
  queue prefix of its own and the schema made by ``docllm init-db``; every process it started is
  stopped afterwards, and the end of each process's log is printed when the test failed.
- ``bare_harness``: the same without ``init-db`` (an empty database).
- ``probe``: a :class:`~tests.e2e.harness.Probe` on the same servers and prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Harness, Probe, product_env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"e2e_report_{report.when}", report)


def _make(redis_url: str, mysql_url: str, tmp_path: Path) -> Harness:
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    return Harness(tmp_path, product_env(redis_url, mysql_url, prefix, tmp_path / "home"))


def _finish(harness: Harness, request: pytest.FixtureRequest) -> None:
    harness.close()
    report = getattr(request.node, "e2e_report_call", None)
    if report is not None and report.failed:
        print(f"process logs in {harness.logs}\n{harness.dump()}")


@pytest.fixture
def bare_harness(redis_url: str, mysql_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Harness]:
    harness = _make(redis_url, mysql_url, tmp_path)
    yield harness
    _finish(harness, request)


@pytest.fixture
def harness(bare_harness: Harness) -> Harness:
    bare_harness.init_db()
    return bare_harness


@pytest.fixture
def probe(harness: Harness) -> Iterator[Probe]:
    p = Probe(harness.env["DOCLLM_REDIS_URL"], harness.env["DOCLLM_DATABASE_URL"], harness.prefix)
    yield p
    p.close()
