"""``docllm stats --watch``: the live view, run through the CLI on in-memory adapters."""

from __future__ import annotations

import re

import pytest
from dependency_injector import providers
from rich.console import Console

from docllm.container import Container
from docllm.domain.tasks.producer import submit
from docllm.entrypoints import cli, commands
from docllm.entrypoints.watch import _view
from sim.manual_clock import ManualClock
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.repository import InMemoryTaskRepository


@pytest.fixture
def busy_queue(monkeypatch, tmp_path):
    """The CLI's container, with in-memory adapters holding 3 ready tasks, 1 leased for 42 s, 1 dead."""
    monkeypatch.setenv("DOCLLM_HOME", str(tmp_path))
    monkeypatch.setenv("DOCLLM_DATABASE_URL", "sqlite://")
    clock = ManualClock()
    queue, repo = InMemoryTaskQueue(clock), InMemoryTaskRepository(clock)
    for i in range(4):
        submit(repo, queue, f"doc{i}.md", "# Title\n\nText.\n")
    assert queue.claim("some-worker", 60_000) is not None
    clock.advance(42_000)
    queue.dead_letter(None, "not a payload", "malformed payload: not JSON")

    def build_container(settings, log=True):
        c = Container()
        c.settings.override(providers.Object(settings))
        c.clock.override(providers.Object(clock))
        c.queue.override(providers.Object(queue))
        c.repository.override(providers.Object(repo))
        return c

    monkeypatch.setattr(commands, "build_container", build_container)
    return queue


def test_watch_shows_depths_and_the_oldest_processing_task(busy_queue, capsys):
    assert cli.main(["stats", "--watch", "--iterations", "2", "--interval", "0.1"]) == 0
    out = capsys.readouterr().out
    rows = {m.group(1): m.group(2) for m in re.finditer(r"│ ([a-z ()]+?)\s+│\s+([\d.-]+) │", out)}
    assert rows["queue ready"] == "3"
    assert rows["queue processing"] == "1"
    assert rows["queue delayed"] == "0"
    assert rows["queue dead"] == "1"
    assert rows["tasks pending"] == "4"
    assert rows["oldest processing (s)"] == "42.0"


def test_rates_are_per_second_between_two_reads():
    before = {"tasks": {"success": 10}, "queue": {"ready": 8}, "oldest_processing_s": None}
    after = {"tasks": {"success": 16}, "queue": {"ready": 2}, "oldest_processing_s": None}
    console = Console(record=True, width=100)
    console.print(_view(after, before, 2.0))
    text = console.export_text()
    assert re.search(r"tasks success\s+│\s+16 │\s+\+3\.0 │", text)
    assert re.search(r"queue ready\s+│\s+2 │\s+-3\.0 │", text)
    assert re.search(r"oldest processing \(s\)\s+│\s+- │", text)
