"""The operator's commands against worker processes on real redis-server and MariaDB, with the
scripted LLM server: ``docllm workers`` lists a worker with what it runs, ``docllm cancel`` stops a
running task at its worker's next heartbeat (no commit: audit trigger; no LLM request after the
cancel) and keeps a pending one from ever running; a stopped worker leaves the list at once, a
killed one when its TTL runs out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, commits, install_commit_audit, wait_until, write_documents
from tests.support.llm_server import FakeLLM, Reply

pytestmark = pytest.mark.e2e

LLM_SECONDS = 8.0  # the first review's request takes this long: long enough to cancel it mid-call


def _env(llm: FakeLLM) -> dict[str, str]:
    return {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_BASE_URL": llm.base_url,
        "DOCLLM_LLM_API_KEY": "test-key",
        "DOCLLM_LLM_MODEL": "test-model",
        "DOCLLM_CONCURRENCY": "1",
    }


def _asked_about(llm: FakeLLM, heading: str, since: int = 0) -> int:
    chats = [r for r in list(llm.requests)[since:] if r["path"] == "/v1/chat/completions"]
    return sum(1 for r in chats if heading in json.dumps(r["body"], ensure_ascii=False))


def _workers(harness: Harness) -> list[dict]:
    return harness.cli_json("workers")


def test_workers_and_cancel_of_a_running_and_a_pending_task(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    install_commit_audit(probe)
    heads = write_documents(tmp_path / "docs", 3, "op")
    (a, head_a), (b, head_b), (c, _) = heads.items()
    with FakeLLM() as llm:
        llm.script(Reply(delay=LLM_SECONDS))  # A's call; the others are answered at once
        [running] = harness.submit([tmp_path / "docs" / a])
        w1 = harness.worker("w1", _env(llm))
        wait_until(lambda: _asked_about(llm, head_a) == 1, 30, "the LLM call of task A", on_timeout=harness.dump)
        [pending] = harness.submit([tmp_path / "docs" / b])  # the only slot is busy: B waits in ready

        [listed] = wait_until(lambda: [w for w in _workers(harness) if w["in_flight"]], 10, "w1 listed busy")
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

        [submitted] = harness.submit([tmp_path / "docs" / c])  # the worker goes on with other work
        wait_until(lambda: harness.status(submitted["task_id"])[0]["status"] == "success", 40, "task C")
        rows = {r["task_id"]: r for r in harness.status(running["task_id"], pending["task_id"])}
        for task in (running, pending):
            row = rows[task["task_id"]]
            assert (row["status"], row["error"], row["result"]) == ("failed", "cancelled by operator", None)
        assert rows[pending["task_id"]]["attempt"] == 0  # never started
        assert _asked_about(llm, head_a, since=seen) == 0  # no LLM call for A after the cancel
        assert _asked_about(llm, head_b) == 0  # none for B ever
        assert commits(probe) == {submitted["task_id"]: [1]}  # A and B committed nothing
        abandoned = harness.events("abandoned")
        assert [(e["task_id"], e["reason"]) for e in abandoned] == [(running["task_id"], "cancelled")]
        assert harness.cli_json("dead", "list") == []  # cancelled, not dead-lettered

        w2 = harness.worker("w2", _env(llm))
        wait_until(lambda: len(_workers(harness)) == 2, 20, "w2 listed", on_timeout=harness.dump)
        assert w1.stop() == 0
        assert [w["pid"] for w in _workers(harness)] == [w2.pid]  # removed at a clean stop
        w2.kill()
        killed = time.monotonic()
        wait_until(lambda: _workers(harness) == [], 10, "the killed worker's record to expire")
        assert time.monotonic() - killed < 3 * 1.0 + 2  # TTL: three beats of lease/3
