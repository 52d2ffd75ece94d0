"""The review cache (issue 46) as a new user meets it: ``docllm submit`` and a ``docllm worker``
process on redis-server and MariaDB, the LLM the OpenAI-compatible test server, which counts the
chat requests it answers.

- The same document twice costs one review; one edited section costs that section's chunk; ``--fresh``
  and a new rubric version cost every chunk again.
- A worker SIGKILLed between the LLM's answers and its commit (the commit held on a row lock the
  test takes) leaves no entry: a later task with the same document is asked of the LLM again, and
  only once that task committed is the document served from the cache (I17).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.e2e.harness import Harness, Probe, wait_until
from tests.support.llm_server import FakeLLM

pytestmark = pytest.mark.e2e

CHUNK_CHARS = 400
SECTIONS = ["Install", "Configure", "Run", "Upgrade", "Remove"]


def section(title: str, words: str) -> str:
    body = "\n".join(f"{words} line {i} of {title}, with enough words to fill the chunk." for i in range(6))
    return f"# {title}\n\n{body}\n"


def guide(edited: str | None = None) -> str:
    return "\n".join(section(t, "Edited" if t == edited else "Plain") for t in SECTIONS)


def rubric_file(version: int) -> str:
    return f"version: {version}\nchecks:\n  - id: tone\n    kind: instruction\n    text: Report marketing words.\n"


def llm_env(llm: FakeLLM, **more: str) -> dict[str, str]:
    return {
        "DOCLLM_LLM_PROVIDER": "openai",
        "DOCLLM_LLM_BASE_URL": llm.base_url,
        "DOCLLM_LLM_API_KEY": "test-key",
        "DOCLLM_LLM_MODEL": "test-model",
        "DOCLLM_LLM_MAX_CHUNK_CHARS": str(CHUNK_CHARS),
        **more,
    }


def chats(llm: FakeLLM) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in llm.requests)


class Submitter:
    def __init__(self, harness: Harness, probe: Probe, folder: Path, env: dict[str, str]):
        self.harness, self.probe, self.folder, self.env = harness, probe, folder, env

    def submit(self, text: str, *flags: str, env: dict[str, str] | None = None) -> int:
        path = self.folder / "guide.md"
        path.write_text(text, encoding="utf-8")
        task = self.harness.cli_json("submit", str(path), *flags, env={**self.env, **(env or {})})[0]
        return int(task["task_id"])

    def done(self, task_id: int, timeout: float = 60.0) -> dict[str, Any]:
        wait_until(
            lambda: self.probe.rows(False)[task_id]["status"] in ("success", "failed"),
            timeout,
            f"task {task_id} to end",
            on_timeout=self.harness.dump,
        )
        return self.probe.rows()[task_id]


@pytest.mark.timeout(300)
def test_a_new_user_pays_once_per_chunk_and_again_only_for_what_changed(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    (rubrics / "house.yaml").write_text(rubric_file(1), encoding="utf-8")
    with FakeLLM() as llm:
        env = llm_env(llm, DOCLLM_RUBRICS_DIR=str(rubrics))
        user = Submitter(harness, probe, tmp_path, env)
        harness.worker("w1", env)

        first = user.done(user.submit(guide()))
        assert first["status"] == "success" and chats(llm) == 5 and "cached" not in first["result"]

        again = user.done(user.submit(guide()))  # the same document: one review in all
        assert again["status"] == "success" and chats(llm) == 5
        assert again["result"]["cached"] == [{"chunk": n, "task_id": first["task_id"]} for n in range(1, 6)]
        assert again["result"]["findings"] == first["result"]["findings"]

        edited = user.done(user.submit(guide(edited="Upgrade")))  # one section edited: its chunk only
        assert edited["status"] == "success" and chats(llm) == 6
        assert [c["chunk"] for c in edited["result"]["cached"]] == [1, 2, 3, 5]
        assert "Edited line 0 of Upgrade" in str(llm.requests[-1]["body"]["messages"])

        fresh = user.done(user.submit(guide(), "--fresh"))  # --fresh: every chunk again
        assert fresh["status"] == "success" and chats(llm) == 11 and "cached" not in fresh["result"]

        ruled = user.done(user.submit(guide(), "--rubric", "house"))  # a rubric is another prompt
        assert ruled["status"] == "success" and chats(llm) == 16
        user.done(user.submit(guide(), "--rubric", "house"))
        assert chats(llm) == 16
        (rubrics / "house.yaml").write_text(rubric_file(2), encoding="utf-8")  # a new version: everything again
        newer = user.done(user.submit(guide(), "--rubric", "house"))
        assert newer["status"] == "success" and chats(llm) == 21 and "cached" not in newer["result"]
        assert newer["result"]["rubric_version"] == "2"


def lock_waits(probe: Probe) -> int:
    with probe.engine.connect() as conn:
        query = "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'"
        return int(conn.execute(sa.text(query)).scalar_one())


def cache_rows(probe: Probe) -> list[int]:
    with probe.engine.connect() as conn:
        return [int(r[0]) for r in conn.execute(sa.text("SELECT task_id FROM review_cache"))]


@pytest.mark.timeout(300)
def test_a_worker_killed_between_the_answer_and_the_commit_leaves_no_entry(
    harness: Harness, probe: Probe, tmp_path: Path
) -> None:
    with FakeLLM(latency_ms=(1500, 1500)) as llm:
        env = llm_env(llm)
        user = Submitter(harness, probe, tmp_path, env)
        doomed = user.submit(guide(), env={"DOCLLM_MAX_ATTEMPTS": "1"})  # not run again after the kill
        worker = harness.worker("w1", env)
        wait_until(lambda: probe.rows(False)[doomed]["status"] == "processing", 60, "the attempt to start")

        # The row is locked (FOR UPDATE) while the LLM answers: the commit waits on it.
        with probe.engine.connect() as conn:
            held = conn.begin()
            conn.execute(sa.text("SELECT task_id FROM task_doc_llm WHERE task_id = :t FOR UPDATE"), {"t": doomed})
            wait_until(lambda: chats(llm) == 5 and lock_waits(probe) >= 1, 60, "the commit to wait on the lock")
            time.sleep(0.5)
            worker.kill()  # SIGKILL: the answers are in hand, the commit never lands
            worker.wait(10)
            held.rollback()
        assert probe.rows(False)[doomed]["status"] == "processing"
        assert cache_rows(probe) == []  # nothing a later task could read

        harness.worker("w2", env)  # its reaper ends the doomed task (budget 1); a new task is asked again
        later = user.done(user.submit(guide()))
        assert later["status"] == "success" and chats(llm) == 10 and "cached" not in later["result"]
        assert set(cache_rows(probe)) == {later["task_id"]}
        last = user.done(user.submit(guide()))
        assert chats(llm) == 10 and {c["task_id"] for c in last["result"]["cached"]} == {later["task_id"]}
        wait_until(lambda: probe.rows(False)[doomed]["status"] == "failed", 60, "the doomed task to be reaped")
