"""The batch lane and the review cache (issue 46): a batch member whose commit lands writes its
answers to the cache as a realtime commit does, so the same document submitted later to a realtime
lane is served without a request. The batch lane itself reads nothing from the cache (a bulk
task's chunks all go to its batch). The container's whole service on redis-server and SQLite,
against the test server's Batch API (tests/integration/test_batch_lane.py's rig)."""

from __future__ import annotations

from sqlalchemy import text

from docllm.domain.tasks.model import TaskStatus
from tests.integration.test_batch_lane import DOC, rig_for, run_until_finished, running  # noqa: F401 - rig_for is a fixture


def chats(llm) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in llm.requests)


def test_a_committed_batch_member_feeds_the_cache_and_realtime_reads_it(rig_for):  # noqa: F811
    rig, llm = rig_for()
    bulk = rig.submit(1)  # "d0.md", by batch
    service = running(rig)
    try:
        rig.until(rig.finished(bulk))
        assert rig.rows(bulk)[0].status is TaskStatus.success and rig.store.of_task(bulk[0])
        with rig.container.engine().connect() as conn:
            assert [r[0] for r in conn.execute(text("SELECT task_id FROM review_cache"))] == bulk
        asked = chats(llm)
        realtime = rig.submit(1, priority="interactive")  # the same name and document, realtime
        rig.until(rig.finished(realtime))
    finally:
        assert service.wait(30)
    row = rig.rows(realtime)[0]
    assert row.status is TaskStatus.success and chats(llm) == asked
    assert row.result["cached"] == [{"chunk": 1, "task_id": bulk[0]}]
    assert row.result["findings"] == rig.rows(bulk)[0].result["findings"]
    assert row.usage is None  # no call, no cost


def test_with_the_cache_off_a_batch_writes_nothing(rig_for):  # noqa: F811
    rig, llm = rig_for(review_cache=False)
    bulk = rig.submit(1)
    run_until_finished(rig, bulk)
    assert rig.rows(bulk)[0].status is TaskStatus.success
    with rig.container.engine().connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM review_cache")).scalar_one() == 0
