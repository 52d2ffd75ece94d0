"""The review cache (issue 46) through an attempt's own path: the real ``openai`` client against the
OpenAI-compatible test server, which counts requests; the SQL store on SQLite; the spend ledger's
``budget.lua`` on fakeredis.

What decides a chunk's review is its request: the same document costs one review; an edited
section costs its chunk only; ``--fresh``, a new rubric version and another model cost everything;
a hit costs no request and no spend and its report names the task it came from; an entry past
DOCLLM_REVIEW_CACHE_DAYS is not served; a worker that lost its task to another writes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fakeredis
import pytest

from docllm.adapters.llm.openai_reviewer import OpenAIReviewer
from docllm.adapters.redis.budget import RedisSpendBudget
from docllm.adapters.sql.engine import make_engine
from docllm.adapters.sql.migrations import upgrade_schema
from docllm.adapters.sql.repository import SqlAlchemyTaskRepository
from docllm.adapters.sql.review_cache import SqlAlchemyReviewCache
from docllm.domain.llm.ledger import Priced
from docllm.domain.llm.prices import Price, PriceTable
from docllm.domain.llm.spend_ledger import SpendLedger
from docllm.domain.review.cache import DAY_MS, answerer
from docllm.domain.review.memory import ReviewMemory
from docllm.domain.review.rubric import Instruction, Rubric
from docllm.domain.tasks.attempts import TaskProcessor
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.domain.tasks.policies import LeasePolicy, RetryPolicy
from docllm.domain.tasks.producer import submit
from sim.manual_clock import ManualClock
from tests.support.llm_server import FakeLLM, Reply
from tests.support.memory.queue import InMemoryTaskQueue
from tests.support.memory.rubrics import InMemoryRubricCatalog

CHUNK_CHARS = 400  # each section below is one chunk (none is short enough to share one)
PRICE = Price(1000.0, 1000.0)  # USD per 1M tokens: the test server's few tokens cost something


def section(title: str, words: str, lines: int = 6) -> str:
    body = "\n".join(f"{words} line {i} of {title}, with enough words to fill the chunk." for i in range(lines))
    return f"# {title}\n\n{body}\n"


SECTIONS = ["Install", "Configure", "Run", "Upgrade", "Remove"]
DOC = "\n".join(section(t, "Plain") for t in SECTIONS)


def edited(doc: str, title: str) -> str:
    return doc.replace(section(title, "Plain"), section(title, "Edited"))


def rubric(version: str) -> Rubric:
    return Rubric("house", version, (Instruction("tone", text="Flag marketing words."),))


@dataclass
class Rig:
    llm: FakeLLM
    repo: SqlAlchemyTaskRepository
    queue: InMemoryTaskQueue
    clock: ManualClock
    engine: Any
    ledger: SpendLedger | None = None

    def processor(self, model: str = "test-model", days: float = 30.0, base_url: str = "") -> TaskProcessor:
        base_url = base_url or self.llm.base_url
        reviewer = OpenAIReviewer(
            base_url,
            "sk-test",
            model,
            timeout_seconds=5,
            max_chunk_chars=CHUNK_CHARS,
            chunk_parallelism=2,
            prices=PriceTable(((model, PRICE),)),
        )
        memory = ReviewMemory(SqlAlchemyReviewCache(self.engine), answerer(model, base_url), CHUNK_CHARS, days)
        rubrics = InMemoryRubricCatalog(self.rubric)
        return TaskProcessor(
            self.queue,
            self.repo,
            reviewer,
            self.clock,
            RetryPolicy(max_attempts=3),
            LeasePolicy(lease_seconds=30),
            "w1",
            rubrics=rubrics,
            ledger=self.ledger,
            cache=memory,
        )

    rubric: Rubric = rubric("1")

    def chats(self) -> int:
        return sum(r["path"].endswith("/chat/completions") for r in self.llm.requests)

    def review(self, doc: str = DOC, name: str = "guide.md", model: str = "test-model", **kw: Any) -> Task:
        """Submit ``doc`` and run one attempt of it to its end, as a worker does."""
        proc = self.processor(model, kw.pop("days", 30.0), kw.pop("base_url", ""))
        task = submit(self.repo, self.queue, name, doc, rubrics=InMemoryRubricCatalog(self.rubric), **kw)
        delivery = proc.claim()
        assert delivery is not None
        attempt = proc.begin(delivery)
        assert attempt is not None and attempt.task_id == task.task_id
        outcome = run(proc, proc.review(attempt))
        assert proc.finish(attempt, outcome), outcome
        row = self.repo.get(task.task_id)
        assert row is not None
        return row


def run(proc: TaskProcessor, review: Any) -> Any:
    """A review on its own loop, the reviewer's connections closed on it."""

    async def main() -> Any:
        try:
            return await review
        finally:
            await proc.reviewer.close()  # type: ignore[attr-defined]

    return asyncio.run(main())


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    engine = make_engine(f"sqlite:///{tmp_path / 'tasks.db'}")
    upgrade_schema(engine)
    clock = ManualClock()
    with FakeLLM() as llm:
        yield Rig(llm, SqlAlchemyTaskRepository(engine), InMemoryTaskQueue(clock), clock, engine)
    engine.dispose()


def placed(row: Task) -> list[tuple[str, int, str]]:
    return sorted((f["location"]["heading"], f["location"]["line_start"], f["quote"]) for f in row.result["findings"])


def test_the_same_document_twice_costs_one_review(rig):
    first = rig.review()
    assert first.status is TaskStatus.success and rig.chats() == 5 and "cached" not in first.result
    second = rig.review()
    assert rig.chats() == 5  # no request: every chunk from the cache
    assert second.status is TaskStatus.success
    assert second.result["cached"] == [{"chunk": n, "task_id": first.task_id} for n in range(1, 6)]
    assert placed(second) == placed(first) and second.result["chunks"] == 5
    assert second.result["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
    assert second.usage is None  # no LLM call on the row
    assert first.usage is not None and first.usage.calls == 5


def test_an_edited_section_requests_only_its_chunk_and_the_rest_are_placed_where_they_are(rig):
    first = rig.review()
    doc = edited(DOC, "Run").replace("# Install\n\n", "# Install\n\nA new line.\n\n")  # and lines move down
    assert len(doc.split("\n# ")) == 5
    second = rig.review(doc)
    asked = [r["body"]["messages"][1]["content"] for r in rig.llm.requests[5:]]
    # Install's text changed too (a line added), Run's words: those two chunks, and no other, are asked.
    assert rig.chats() == 7 and all("Install" in a or "Run" in a for a in asked)
    assert [c["chunk"] for c in second.result["cached"]] == [2, 4, 5]
    assert {c["task_id"] for c in second.result["cached"]} == {first.task_id}
    # Every finding quotes its section's heading at that heading's line in the edited document.
    lines = doc.split("\n")
    for _, line, quote in placed(second):
        assert lines[line - 1] == quote


def test_fresh_requests_everything_and_its_answers_replace_the_cached_ones(rig):
    rig.review()
    fresh = rig.review(fresh=True)
    assert rig.chats() == 10 and "cached" not in fresh.result and fresh.fresh
    again = rig.review()
    assert rig.chats() == 10
    assert {c["task_id"] for c in again.result["cached"]} == {fresh.task_id}  # the fresh review's answers


def test_a_new_rubric_version_requests_everything(rig):
    rig.review(rubric="house")
    rig.review(rubric="house")
    assert rig.chats() == 5
    rig.rubric = rubric("2")
    newer = rig.review(rubric="house")
    assert rig.chats() == 10 and "cached" not in newer.result and newer.result["rubric_version"] == "2"


def test_another_model_is_not_served_the_first_ones_review(rig):
    rig.review()
    other = rig.review(model="other-model")
    assert rig.chats() == 10 and "cached" not in other.result and other.result["model"] == "other-model"


def test_the_same_model_at_another_server_is_not_served(rig):
    """The same model name may be another model elsewhere (a local server's "default"): the server
    is part of who answers."""
    rig.review()
    elsewhere = rig.llm.base_url.replace("127.0.0.1", "localhost")
    other = rig.review(base_url=elsewhere)
    assert rig.chats() == 10 and "cached" not in other.result
    rig.review(base_url=rig.llm.base_url + "/")  # the same server, written with a trailing slash
    assert rig.chats() == 10


def test_another_task_name_is_another_prompt(rig):
    """The task name is in the prompt the model reads: a document under another name is asked again."""
    rig.review(name="a.md")
    rig.review(name="b.md")
    assert rig.chats() == 10


def test_an_entry_past_its_days_is_not_served(rig):
    rig.review(days=2)
    rig.clock.advance(2 * DAY_MS + 1)
    rig.review(days=2)
    assert rig.chats() == 10


def test_a_hit_costs_no_spend_and_reserves_nothing(rig):
    """A hit goes through the spend ledger as zero: nothing reserved for the cached chunks, nothing
    counted, so a cached document is served even when its whole estimate would not fit under the
    day's cap; an edited chunk is reserved and counted as any request is (I16)."""
    client = fakeredis.FakeRedis()

    def ledger(cap_usd: float) -> RedisSpendBudget:
        budget = RedisSpendBudget(client, "docllm", rig.clock, cap_usd=cap_usd)
        rig.ledger = SpendLedger(budget, [Priced("default", "test-model", PRICE)], None, CHUNK_CHARS)
        return budget

    budget = ledger(0.0)  # no cap
    rig.review()
    spent = budget.view().spent_micro
    assert spent > 0 and budget.view().held_micro == 0
    budget = ledger(spent * 1.2 / 1e6)  # room for a fifth of the document, not for all of it
    again = rig.review()
    assert again.status is TaskStatus.success and len(again.result["cached"]) == 5
    assert budget.view().spent_micro == spent and budget.view().held_micro == 0
    budget = ledger(0.0)
    rig.review(edited(DOC, "Remove"))
    assert spent < budget.view().spent_micro < spent + spent / 2 and budget.view().held_micro == 0


def test_a_worker_that_lost_its_task_writes_nothing_to_the_cache(rig):
    """Two workers race on one task: the first's lease is lost and the row handed back while its
    answers are in hand; the second starts it. Only the commit that lands writes, so the first's
    answers (a marker in their summaries) are never served, before or after the second commits."""
    marker = json.dumps({"findings": [], "summary": "STALE ANSWER"})
    rig.llm.script(*[Reply(content=marker)] * 5)
    proc, other = rig.processor(), rig.processor()  # two workers
    task = submit(rig.repo, rig.queue, "guide.md", DOC)
    first = proc.begin(proc.claim())
    assert first is not None
    stale = run(proc, proc.review(first))
    assert stale.report is not None and stale.report["summary"].startswith("STALE")
    assert rig.repo.hand_back(task.task_id, first.number, "lease lost")  # the reaper's move
    rig.queue.push(first.delivery.raw)
    second = other.begin(other.claim())
    assert second is not None and second.number == first.number + 1
    fresh = run(other, other.review(second))
    assert fresh.kind.value == "success"
    assert not proc.finish(first, stale)  # stale: the row is the second's
    assert _entries(rig) == []
    assert other.finish(second, fresh)
    assert _entries(rig) and all("STALE" not in e for e in _entries(rig))
    again = rig.review()
    assert {c["task_id"] for c in again.result["cached"]} == {task.task_id}
    assert "STALE" not in again.result["summary"]


def test_a_review_that_fails_writes_nothing(rig):
    """Chunks answered before another chunk failed are not cached: nothing committed them."""
    from tests.support.llm_server import error

    rig.llm.script(Reply(), Reply(), error(400, "no"))
    proc = rig.processor()
    submit(rig.repo, rig.queue, "guide.md", DOC)
    attempt = proc.begin(proc.claim())
    assert attempt is not None
    outcome = run(proc, proc.review(attempt))
    assert outcome.kind.value != "success"
    proc.finish(attempt, outcome)
    assert _entries(rig) == []


def _entries(rig: Rig) -> list[str]:
    from sqlalchemy import text

    with rig.engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT answer FROM review_cache"))]


def test_a_review_outside_an_attempt_never_sees_the_cache(rig):
    """``docllm eval`` and ``docllm check`` call the reviewer as this does (``review_with``, no
    attempt): they measure the reviewer, so every chunk is asked even when the cache holds it."""
    from docllm.domain.review.ports import review_with

    rig.review()
    proc = rig.processor()
    report = run(proc, review_with(proc.reviewer, "guide.md", DOC, None))
    assert rig.chats() == 10 and "cached" not in report


def test_an_entry_too_big_for_one_statement_is_left_out_and_the_commit_lands(rig):
    """Entries are bounded like the store's UPDATEs (below the server's packet): one that would not
    fit is not cached, rather than refusing the commit it rides with."""
    from sqlalchemy import text

    from docllm.adapters.sql.review_cache import write_entries
    from docllm.domain.review.cache import CachedChunk

    small = CachedChunk("a" * 64, {"findings": [], "summary": "ok"}, "m", None, 1, 0)
    huge = CachedChunk("b" * 64, {"findings": [], "summary": "x" * 50_000}, "m", None, 1, 0)
    with rig.engine.begin() as conn:
        assert write_entries(conn, [huge, small], budget=20_000) == 1
    with rig.engine.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT cache_key FROM review_cache"))] == ["a" * 64]


def test_an_entry_this_version_cannot_serve_is_reserved_and_asked_like_any_chunk(rig):
    """An entry whose answer does not read as one (a row edited by hand, a bug of another version)
    is not a hit: the spend ledger reserves its chunk, so a cap that has no room for it stops the
    attempt before anything is sent, instead of a request nobody reserved."""
    from sqlalchemy import text

    client = fakeredis.FakeRedis()
    budget = RedisSpendBudget(client, "docllm", rig.clock, cap_usd=0.0)
    rig.ledger = SpendLedger(budget, [Priced("default", "test-model", PRICE)], None, CHUNK_CHARS)
    rig.review()
    spent, asked = budget.view().spent_micro, rig.chats()
    with rig.engine.begin() as conn:
        conn.execute(
            text("""UPDATE review_cache SET answer = '{"findings": [{"category": "nonsense"}], "summary": ""}'""")
        )
    budget = RedisSpendBudget(client, "docllm", rig.clock, cap_usd=spent * 1.2 / 1e6)  # no room for 5 chunks
    rig.ledger = SpendLedger(budget, [Priced("default", "test-model", PRICE)], None, CHUNK_CHARS)
    refused = rig.review()
    assert refused.status is TaskStatus.pending and "spend cap" in (refused.error or "")  # handed back, uncharged
    assert rig.chats() == asked and budget.view().spent_micro == spent


def test_entries_are_shared_within_a_tenant_and_never_across_tenants(rig):
    """A report names the task its chunks came from: a tenant is served only its own entries
    (tasks without a tenant share theirs), so no tenant learns what another submitted."""
    acme = rig.review(tenant="acme")
    again = rig.review(tenant="acme")
    assert rig.chats() == 5 and {c["task_id"] for c in again.result["cached"]} == {acme.task_id}
    globex = rig.review(tenant="globex")
    assert rig.chats() == 10 and "cached" not in globex.result
    nobody = rig.review()
    assert rig.chats() == 15 and "cached" not in nobody.result
    rig.review()
    assert rig.chats() == 15
