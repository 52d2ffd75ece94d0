"""The operator's commands against worker processes on real redis-server and MariaDB, with the
scripted LLM server: ``docllm workers`` lists a worker with what it runs, ``docllm cancel`` stops a
running task at its worker's next heartbeat (no commit: audit trigger; no LLM request after the
cancel) and keeps a pending one from ever running; a killed worker leaves the list when its TTL
runs out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from docllm.adapters.redis.registry import RedisWorkerRegistry
from tests.e2e.harness import Harness, Probe, commits, install_commit_audit, wait_until, write_documents
from tests.support.llm_server import FakeLLM, Reply

pytestmark = pytest.mark.e2e

LLM_SECONDS = 40.0  # the first review's request takes this long: long enough to cancel it mid-call, even
# on a loaded machine where each CLI process takes seconds to start (the fake LLM's wait ends when
# it closes, so a longer one costs nothing); the worker's LLM timeout must be longer still: the
# harness's 10 s once ended the call first and the task succeeded before the cancel


def _env(llm: FakeLLM) -> dict[str, str]:
    return {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_BASE_URL": llm.base_url,
        "DOCLLM_LLM_API_KEY": "test-key",
        "DOCLLM_LLM_MODEL": "test-model",
        "DOCLLM_CONCURRENCY": "1",
        "DOCLLM_LLM_TIMEOUT_SECONDS": str(LLM_SECONDS + 20),
    }


def _asked_about(llm: FakeLLM, heading: str, since: int = 0) -> int:
    chats = [r for r in list(llm.requests)[since:] if r["path"] == "/v1/chat/completions"]
    return sum(1 for r in chats if heading in json.dumps(r["body"], ensure_ascii=False))


def _live(probe: Probe) -> list:
    """The registry read directly (polling through the CLI costs a process start per look)."""
    return RedisWorkerRegistry(probe.redis, probe.keys).live()


def _rows_once_done(probe: Probe, task_id: int) -> dict | None:
    rows = probe.rows()
    return rows if rows[task_id]["status"] == "success" else None


def test_workers_and_cancel_of_a_running_and_a_pending_task(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    install_commit_audit(probe)
    heads = write_documents(tmp_path / "docs", 3, "op")
    (a, head_a), (b, head_b), (c, _) = heads.items()
    with FakeLLM() as llm:
        llm.script(Reply(delay=LLM_SECONDS))  # A's call; the others are answered at once
        # One slot, FIFO: A runs, B and C wait in ready.
        running, pending, later = harness.submit([tmp_path / "docs" / name for name in (a, b, c)])
        w1 = harness.worker("w1", _env(llm))
        wait_until(lambda: _asked_about(llm, head_a) == 1, 30, "the LLM call of task A", on_timeout=harness.dump)

        wait_until(lambda: [w for w in _live(probe) if w.in_flight], 10, "w1 listed busy")
        [listed] = harness.cli_json("workers")
        assert (listed["slots"], listed["pid"]) == (1, w1.pid)
        assert [(f["task_id"], f["attempt"]) for f in listed["in_flight"]] == [(running["task_id"], 1)]

        seen = len(llm.requests)
        started = time.monotonic()
        result = harness.cli("cancel", str(running["task_id"]), str(pending["task_id"]), "--json")
        took = time.monotonic() - started
        assert [(r["task_id"], r["result"]) for r in json.loads(result.stdout)] == [
            (running["task_id"], "cancelled"),
            (pending["task_id"], "cancelled"),
        ]
        assert took < LLM_SECONDS - 2  # stopped at a heartbeat (lease/3 = 1 s), not when the call ended

        rows = wait_until(lambda: _rows_once_done(probe, later["task_id"]), 40, "task C (the next one) to succeed")
        for task in (running, pending):
            row = rows[task["task_id"]]
            assert (row["status"], row["error"], row["result"]) == ("failed", "cancelled by operator", None)
        # Never reviewed. Usually never started (attempt 0): the cancel fails the pending row. Under
        # load the worker may claim B in the moment between the cancel's mark and that write (A's
        # cancel freed its slot); its start then finds the mark and ends B before any LLM call.
        assert rows[pending["task_id"]]["attempt"] in (0, 1)
        assert _asked_about(llm, head_a, since=seen) == 0  # no LLM call for A after the cancel
        assert _asked_about(llm, head_b) == 0  # none for B ever
        assert commits(probe) == {later["task_id"]: [1]}  # A and B committed nothing
        abandoned = harness.events("abandoned")
        assert [(e["task_id"], e["reason"]) for e in abandoned] == [(running["task_id"], "cancelled")]
        assert probe.dead_letters() == []  # cancelled, not dead-lettered

        w1.kill()  # a stop would remove the record (tests/unit/test_presence.py); a SIGKILL cannot
        killed = time.monotonic()
        wait_until(lambda: _live(probe) == [], 10, "the killed worker's record to expire")
        assert time.monotonic() - killed < 3 * 1.0 + 3  # TTL: three beats of lease/3 (and room for a busy poll)
        assert harness.cli_json("workers") == []
