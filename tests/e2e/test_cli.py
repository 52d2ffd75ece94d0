"""``docllm`` as a subprocess: the JSON shapes of submit/status/stats and the exit codes."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.harness import Harness, Probe, wait_until, write_documents
from tests.support.cli_shapes import CLOSED_BREAKER

pytestmark = pytest.mark.e2e

STATUS_KEYS = {
    "task_id",
    "task_name",
    "status",
    "attempt",
    "retry_count",
    "result",
    "error",
    "created_at",
    "finished_at",
}


def _one_line_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line message on stderr, got:\n{result.stderr}"
    return lines[0]


def test_submit_status_stats_json_shapes(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    assert harness.cli("init-db").returncode == 0  # a second time: idempotent
    write_documents(tmp_path / "docs", 2)
    paths = sorted((tmp_path / "docs").glob("*.md"))

    created = harness.submit(paths)
    assert [sorted(t) for t in created] == [["task_id", "task_name"]] * 2
    assert [t["task_name"] for t in created] == ["doc-00001.md", "doc-00002.md"]
    ids = [t["task_id"] for t in created]
    assert all(isinstance(i, int) for i in ids) and ids[0] < ids[1]

    stats = harness.stats()
    llm = stats.pop("llm")
    assert llm.pop("usage")["calls"] == 0  # the offline reviewer calls no LLM
    budget = llm.pop("budget")  # no cap set: claims allowed (its day follows the authority clock)
    assert (budget["claims"], budget["cap_from"], budget["spent_usd_today"]) == ("allowed", "off", 0)
    by_lane = {row["lane"]: row["depth"] for row in stats.pop("lanes")["by_lane"]}
    assert by_lane == {"interactive": 0, "default": 2, "bulk": 0}  # submitted without a priority
    assert {**stats, "llm": llm} == {
        "tasks": {"pending": 2, "processing": 0, "success": 0, "failed": 0},
        "queue": {"ready": 2, "processing": 0, "delayed": 0, "dead": 0},
        "oldest_processing_s": None,
        "llm": {"breaker": CLOSED_BREAKER},
    }

    listed = harness.status()  # no ids: the newest tasks
    assert {t["task_id"] for t in listed} == set(ids)
    for task in listed:
        assert set(task) >= STATUS_KEYS
        assert (task["status"], task["attempt"], task["retry_count"], task["result"], task["finished_at"]) == (
            "pending",
            0,
            0,
            None,
            None,
        )
        datetime.fromisoformat(task["created_at"])

    harness.worker("w1")
    wait_until(lambda: probe.counts()["success"] == 2, 30, "the worker to finish both", on_timeout=harness.dump)
    done = harness.status(*ids)
    assert [t["task_id"] for t in done] == ids
    for task in done:
        assert set(task) >= STATUS_KEYS
        assert task["status"] == "success" and task["attempt"] == 1 and task["error"] is None
        assert isinstance(task["result"], dict) and isinstance(task["result"]["findings"], list)
        assert datetime.fromisoformat(task["finished_at"]) >= datetime.fromisoformat(task["created_at"])
    stats = harness.stats()
    assert stats["tasks"] == {"pending": 0, "processing": 0, "success": 2, "failed": 0}
    assert stats["queue"] == {"ready": 0, "processing": 0, "delayed": 0, "dead": 0}


def test_exit_codes_and_one_line_errors(harness: Harness, tmp_path: Path) -> None:
    usage = harness.cli("status", "not-a-number", check=False)
    assert usage.returncode == 2 and _one_line_error(usage).startswith("docllm: argument TASK_ID: 'not-a-number'")
    assert harness.cli("no-such-command", check=False).returncode == 2
    assert harness.cli("submit", check=False).returncode == 2  # PATH is required

    missing = harness.cli("status", "999999", "--json", check=False)
    assert missing.returncode == 1 and missing.stdout.strip() == "[]"
    assert _one_line_error(missing) == "docllm: no task with id 999999"

    no_file = harness.cli("submit", str(tmp_path / "nope.md"), "--json", check=False)
    assert no_file.returncode == 1 and "nope.md" in _one_line_error(no_file)

    empty = tmp_path / "empty.md"
    empty.write_text("   \n")
    assert harness.cli("submit", str(empty), check=False).returncode == 1

    bad_setting = harness.cli("stats", env={"DOCLLM_LEASE_SECONDS": "soon"}, check=False)
    assert bad_setting.returncode == 2 and "DOCLLM_LEASE_SECONDS" in _one_line_error(bad_setting)

    no_redis = harness.cli("stats", "--json", env={"DOCLLM_REDIS_URL": "redis://127.0.0.1:9/0"}, check=False)
    assert no_redis.returncode == 1 and "redis" in _one_line_error(no_redis).lower()


def test_commands_before_init_db_fail_with_one_line(bare_harness: Harness) -> None:
    result = bare_harness.cli("stats", "--json", check=False)
    assert result.returncode == 1
    assert _one_line_error(result).startswith("docllm: ")
