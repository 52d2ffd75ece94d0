"""Bad input reaching real worker processes: each ends in the dead-letter list or ``failed`` with a
reason, and no worker process dies. (The chaos test does the same under load and faults.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.chaos import MALFORMED, UNKNOWN_TASK_ID
from tests.e2e.harness import Harness, Probe, wait_until, write_documents

pytestmark = pytest.mark.e2e

# Payloads a broken producer could LPUSH: the chaos scenario's list (all valid UTF-8).
TEN_MB = 10 * 1024 * 1024


def write_big_document(path: Path, size: int = TEN_MB) -> str:
    heading = "# A document of ten megabytes"
    paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 16 + "\n\n"
    body = heading + "\n\n" + paragraph * (size // len(paragraph) + 1)
    path.write_text(body[:size], encoding="utf-8")
    return heading


def test_malformed_payloads_deleted_rows_and_a_10mb_document(harness: Harness, probe: Probe, tmp_path: Path) -> None:
    for raw in MALFORMED:
        probe.redis.lpush(probe.keys.ready, raw)

    write_big_document(tmp_path / "big.md")
    [big] = harness.submit([tmp_path / "big.md"], env={"DOCLLM_MAX_DOCUMENT_BYTES": str(16 * 1024 * 1024)})
    write_documents(tmp_path / "docs", 2)
    doomed, control = harness.submit(sorted((tmp_path / "docs").glob("*.md")))
    # The worker starts once everything is queued, so the wait below is already watching when it
    # starts the doomed task (a submit that took seconds to exit on a loaded machine once let the
    # worker finish both before the wait began).
    worker = harness.worker("w1", {"DOCLLM_OFFLINE_LATENCY_SECONDS": "4", "DOCLLM_CONCURRENCY": "2"})
    wait_until(
        lambda: probe.rows(False)[doomed["task_id"]]["status"] == "processing",
        60,
        "the worker to start the task whose row is then deleted",
        on_timeout=harness.dump,
    )
    assert probe.execute("DELETE FROM task_doc_llm WHERE task_id = :id", id=doomed["task_id"]) == 1

    def settled() -> bool:
        sizes = probe.queue_sizes()
        rows = probe.rows(False)
        return (
            sizes["ready"] == sizes["processing"] == sizes["delayed"] == sizes["leases"] == 0
            and rows[control["task_id"]]["status"] == "success"
            and rows[big["task_id"]]["status"] == "failed"
        )

    wait_until(settled, 40, "every payload to be settled", on_timeout=harness.dump)

    dead = harness.cli_json("dead", "list", "--limit", "100")
    assert all(set(d) == {"task_id", "reason", "payload", "at_ms"} and d["reason"] for d in dead)
    payloads = [d["payload"] for d in dead]
    for raw in MALFORMED:
        assert payloads.count(raw) == 1, f"{raw[:60]!r} is not in the dead-letter list exactly once"
    by_task = {d["task_id"]: d["reason"] for d in dead if d["task_id"] is not None}
    assert "deleted" in by_task[doomed["task_id"]] or "no row" in by_task[doomed["task_id"]]
    assert "over the limit" in by_task[big["task_id"]]
    assert f"no row with task_id {UNKNOWN_TASK_ID}" in by_task[UNKNOWN_TASK_ID]
    assert len(dead) == len(MALFORMED) + 2

    [row] = harness.status(big["task_id"])
    assert row["status"] == "failed" and "over the limit" in row["error"]
    assert harness.status(control["task_id"])[0]["status"] == "success"
    assert worker.alive
    assert not [r for r in harness.log_lines() if r.get("level") in ("error", "critical")]


def test_non_utf8_payload_is_dead_lettered_and_does_not_block_the_reaper(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    bad = b'\xff\xfe{"task_id": 1}'
    probe.redis.lpush(probe.keys.ready, bad)  # claimed first (FIFO)
    write_documents(tmp_path / "docs", 1)
    [task] = harness.submit(sorted((tmp_path / "docs").glob("*.md")))
    worker = harness.worker("w1", {"DOCLLM_OFFLINE_LATENCY_SECONDS": "30", "DOCLLM_CONCURRENCY": "1"})
    wait_until(
        lambda: probe.rows(False)[task["task_id"]]["status"] == "processing",
        30,
        "the worker to start the good task",
        on_timeout=harness.dump,
    )
    worker.kill()  # its lease on the good task now expires; a reaper must reclaim it
    harness.reaper("r1")
    wait_until(
        lambda: probe.rows(False)[task["task_id"]]["retry_count"] == 1,
        10,
        "the reaper to reclaim the good task",
        on_timeout=harness.dump,
    )
    assert any(d["payload"].encode("utf-8", "surrogateescape") == bad for d in probe.dead_letters())


def test_dead_list_json_is_valid_utf8_whatever_the_payload(harness: Harness, probe: Probe) -> None:
    from docllm.adapters.redis.queue import RedisTaskQueue

    queue = RedisTaskQueue(probe.redis, probe.keys.prefix)  # the product's own dead-letter write
    queue.dead_letter(None, b"\xff\xfe{not utf8".decode("utf-8", "surrogateescape"), "malformed payload: test")
    result = harness.cli("dead", "list", "--json", check=False)
    assert result.returncode == 0, result.stderr
    [entry] = json.loads(result.stdout.encode("utf-8"))  # strict: raises on a byte that is not UTF-8
    assert entry["reason"] == "malformed payload: test"
