"""``docllm init-db`` adopts the original note's table as it is in the field (ARCHITECTURE.md, Switching over),
on a real MariaDB whose time zone is +08:00: ENUM status, local-time DATETIMEs, a TEXT result in
whatever form the old code wrote it, non-ASCII names. Finished rows keep every byte."""

from __future__ import annotations

import pytest
import redis
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.domain.tasks.model import StartResult, TaskStatus
from docllm.entrypoints import views
from tests.support.original_deployment import OriginalDeployment

pytestmark = pytest.mark.mariadb


@pytest.fixture
def old(mariadb_server, mysql_url):
    with mariadb_server.connect(make_url(mysql_url).database) as conn:
        deployment = OriginalDeployment(conn, redis.Redis())  # Redis unused here
        deployment.create_table()
        yield deployment


def test_init_db_adopts_the_original_table_and_leaves_finished_rows_alone(old, mysql_url):
    done_json = old.insert("接口文档 v1", "# a", "success", '{"passed": true, "issues": ["缺少示例"]}')
    done_text = old.insert("[v2] 用户手册", "# b", "success", "检查通过：没有发现问题")
    failed = old.insert("发布说明", "# c", "failed", "Traceback: LLM timeout", retry_count=3)
    pending = old.insert("待检查", "# 待检查\n\n正文。\n")
    processing = old.insert("处理中", "# 处理中\n\n正文。\n", "processing")
    before = old.original_rows()

    upgrade_schema(mysql_url)
    upgrade_schema(mysql_url)  # idempotent

    assert old.original_rows() == before
    engine = make_engine(mysql_url)
    try:
        columns = {c["name"]: c for c in inspect(engine).get_columns("task_doc_llm")}
        assert "ENUM" in str(columns["status"]["type"]).upper()  # left as it is
        assert "LONGTEXT" in str(columns["result"]["type"]).upper()  # widened, bytes kept
        repo = SqlAlchemyTaskRepository(engine)
        rows = {t.task_id: t for t in repo.recent()}
        assert rows[done_json].result == {"passed": True, "issues": ["缺少示例"]}
        assert rows[done_text].result == "检查通过：没有发现问题"  # text, not an error
        assert (rows[failed].status, rows[failed].result) == (TaskStatus.failed, "Traceback: LLM timeout")
        shown = [views.task_json(t) for t in rows.values()]
        assert {s["task_name"] for s in shown} >= {"接口文档 v1", "[v2] 用户手册"}
        views.tasks_table(list(rows.values()))  # renders names with brackets

        # Open rows run as docllm's own: the ENUM takes docllm's statuses, a long report fits.
        started = repo.start_attempt(pending, "tok")
        assert started.result is StartResult.started and started.task.attempt == 1
        assert repo.commit(pending, 1, {"findings": [{"quote": "x" * 70_000}]})
        assert repo.get(pending).status is TaskStatus.success
        assert repo.hand_back(processing, 0, "recovered")  # the old worker's row, attempt 0
        assert repo.get(processing).status is TaskStatus.pending
        assert {k: v for k, v in old.original_rows().items() if k in before} == before
    finally:
        engine.dispose()
