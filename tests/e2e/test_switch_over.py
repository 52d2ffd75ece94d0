"""Switching over from the original deployment with tasks in flight (ARCHITECTURE.md, Switching over, issue 16).

The original note's table and Redis state are built by hand on real MariaDB (+08:00) and Redis, as
its workers leave them when their containers die between any two of their steps; an old-style
producer keeps pushing while ``docllm init-db`` runs and two docllm workers take over. Every open
task must end ``success`` exactly once, finished rows must keep every byte, Redis must end empty,
and ``docllm status``/``stats`` must show old and new rows alike.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis
from sqlalchemy.engine import make_url

from tests.e2e.harness import (
    FAST_SETTINGS,
    Harness,
    Probe,
    commits,
    install_commit_audit,
    wait_until,
)
from tests.support.original_deployment import OriginalDeployment

pytestmark = pytest.mark.e2e

INTERVAL = float(FAST_SETTINGS["DOCLLM_RECONCILE_INTERVAL_SECONDS"])
GRACE = float(FAST_SETTINGS["DOCLLM_RECONCILE_GRACE_SECONDS"])
PRODUCED_DURING_SWITCH = 12


def document(name: str) -> str:
    return f"# {name}\n\n这是一份需要检查的文档。It explains one thing.\n\n## 细节\n\nStep one is described here.\n"


def build_the_original_deployment(old: OriginalDeployment) -> tuple[set[int], dict[str, int]]:
    """Finished rows, old workers' leftovers of every kind, and a backlog in ready. Returns the
    ids of the open tasks and of the finished rows by kind."""
    old.create_table()
    now = int(time.time())
    finished = {
        "json": old.insert("接口文档 v1", document("a"), "success", '{"passed": true, "issues": ["缺少示例"]}'),
        "text": old.insert("[v2] 用户手册", document("b"), "success", "检查通过：没有发现问题"),
        "failed": old.insert("发布说明", document("c"), "failed", "Traceback: openai.APITimeoutError", 3),
    }
    open_ids: set[int] = set()

    def dies_after(name: str, *steps: str) -> int:
        """An old worker runs its loop up to ``steps`` on a fresh task, then its container dies."""
        task_id = old.produce(name, document(name))
        taken = old.take()  # BRPOPLPUSH ready -> processing
        assert taken is not None, "the task just produced is in ready"
        _, raw = taken
        for step in steps:
            if step == "stamp":
                old.stamp(task_id, now)
            elif step == "stamp+8h":  # a worker whose clock ran 8 hours ahead (D4)
                old.stamp(task_id, now + 8 * 3600)
            elif step == "mark":
                assert old.mark_processing(task_id)  # processing_started_at = NOW(), +08:00
            elif step == "raise":  # process_task raised: the finally block runs
                pass
            elif step == "success":
                old.write_result(task_id, "success", '{"passed": true}')
            elif step == "lrem":
                old.unlist(raw)
            elif step == "hdel":
                old.unstamp(task_id)
            elif step == "reclaim":  # the old reaper's DB half; it died before its Redis half
                old.reclaim(task_id)
        return task_id

    open_ids.add(dies_after("崩溃于认领后"))  # D1: payload without a stamp, row pending
    open_ids.add(dies_after("崩溃于标记前", "stamp+8h"))  # D2: row pending, payload + stamp
    open_ids.add(dies_after("调用模型时崩溃", "stamp", "mark"))  # D3: row processing, payload + stamp
    open_ids.add(dies_after("处理异常", "stamp", "mark", "raise", "lrem", "hdel"))  # processing, nothing in Redis
    open_ids.add(dies_after("清理一半", "stamp", "mark", "raise", "lrem"))  # processing, a stamp without payload
    open_ids.add(dies_after("巡检中断", "stamp", "mark", "reclaim"))  # pending, payload + stamp in processing
    finished["done_before_lrem"] = dies_after("完成未清理", "stamp", "mark", "success")
    finished["done_before_hdel"] = dies_after("完成一半清理", "stamp", "mark", "success", "lrem")
    for i in range(10):  # the backlog
        open_ids.add(old.produce(f"积压任务 {i}", document(f"backlog {i}")))
    return open_ids, finished


def test_switch_over_with_tasks_in_flight(
    bare_harness: Harness, mariadb_server, mysql_url: str, redis_url: str, tmp_path: Path
) -> None:
    harness = bare_harness
    database = make_url(mysql_url).database
    client = redis.Redis.from_url(redis_url)
    with mariadb_server.connect(database) as conn:
        old = OriginalDeployment(conn, client, harness.prefix)
        open_ids, finished = build_the_original_deployment(old)
        before = old.original_rows()
        assert set(before) == set(finished.values())
        leftovers = {k: v for k, v in redis_sizes(client, old).items() if v}
        assert leftovers == {"ready": 10, "processing": 5, "processing_ts": 6}, leftovers

    # An old-style producer keeps pushing through the switch.
    produced: list[int] = []
    producer_error: list[BaseException] = []

    def produce() -> None:
        try:
            with mariadb_server.connect(database) as conn:
                producer = OriginalDeployment(conn, redis.Redis.from_url(redis_url), harness.prefix)
                for i in range(PRODUCED_DURING_SWITCH):
                    produced.append(producer.produce(f"新任务 {i}", document(f"new {i}")))
                    time.sleep(0.25)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            producer_error.append(exc)

    thread = threading.Thread(target=produce, name="old-producer")
    thread.start()
    harness.init_db()
    probe = Probe(redis_url, mysql_url, harness.prefix)
    try:
        install_commit_audit(probe)
        started = time.monotonic()
        harness.worker("w1")
        harness.worker("w2")
        thread.join(30)
        assert not thread.is_alive() and not producer_error, producer_error
        every_open = open_ids | set(produced)

        def all_done() -> bool:
            rows = probe.rows(with_result=False)
            return all(rows[t]["status"] == "success" for t in every_open)

        wait_until(all_done, 60, "every open task to succeed", on_timeout=harness.dump)
        sizes = lambda: {k: v for k, v in probe.queue_sizes().items() if v}  # noqa: E731
        wait_until(lambda: sizes() == {}, 30, "Redis to be empty", on_timeout=lambda: f"{sizes()}\n{harness.dump()}")
        recovered_after = time.monotonic() - started
        print(f"recovered {len(every_open)} open tasks and every leftover in {recovered_after:.1f}s")
        # The bound from the settings: a first sighting within one reconcile interval, the second a
        # grace later at the next cycle, then a claim at once; plus start-up on a loaded machine.
        assert recovered_after < 2 * INTERVAL + GRACE + 20, recovered_after

        # Finished rows keep every byte; none was committed (or touched) by docllm.
        with mariadb_server.connect(database) as conn:
            assert (
                OriginalDeployment(conn, client, harness.prefix).original_rows(
                    f"task_id IN ({', '.join(map(str, before))})"
                )
                == before
            )
        audit = commits(probe)
        assert set(audit) == every_open
        assert {t: len(a) for t, a in audit.items() if len(a) != 1} == {}  # each committed once
        assert harness.events("stale_attempt") == []  # no attempt ran beside another one
        assert harness.events("leftover_released"), "the old workers' leftovers went through the sweep"

        shown = {row["task_id"]: row for row in harness.status(*sorted(every_open | set(before)))}
        assert shown[finished["json"]]["result"] == {"passed": True, "issues": ["缺少示例"]}
        assert shown[finished["text"]]["result"] == "检查通过：没有发现问题"
        assert shown[finished["failed"]]["status"] == "failed"
        assert shown[finished["text"]]["task_name"] == "[v2] 用户手册"
        assert all(shown[t]["status"] == "success" and isinstance(shown[t]["result"], dict) for t in every_open)
        table = harness.cli("status")  # the table view, over old and new rows
        assert "[v2] 用户手册" in table.stdout or "用户手册" in table.stdout
        stats = harness.stats()
        assert stats["tasks"] == {"pending": 0, "processing": 0, "success": len(every_open) + 4, "failed": 1}
        assert stats["queue"] == {"ready": 0, "processing": 0, "delayed": 0, "dead": 0}
        assert stats["oldest_processing_s"] is None
        harness.cli("stats")
    finally:
        probe.close()
        client.close()


def redis_sizes(client: redis.Redis, old: OriginalDeployment) -> dict[str, int]:
    k = old.keys
    return {
        "ready": client.llen(k.ready),
        "processing": client.llen(k.processing),
        "processing_ts": client.hlen(k.processing_ts),
        "leases": client.hlen(k.leases),
    }
