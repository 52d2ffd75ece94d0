"""The review cache's rules (issue 46): the key is what decides a chunk's review and nothing else;
a recall serves nothing for a fresh task; expiry's sweep is bounded work; the settings stop a bad
value at start; the container builds it for the LLM reviewer only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dependency_injector import providers

from docllm.container import Container
from docllm.domain.errors import Unavailable
from docllm.domain.review.cache import DAY_MS, CachedChunk, Recall, answerer, chunk_key, with_served
from docllm.domain.review.memory import AHEAD_MS, ReviewMemory
from docllm.domain.review.prompt import build_messages
from docllm.domain.review.report import validate_report
from docllm.domain.review.rubric import Instruction, Rubric
from docllm.domain.tasks.model import Task, TaskStatus
from docllm.settings import Settings, SettingsError
from tests.support.memory.repository import InMemoryTaskRepository
from tests.support.memory.review_cache import InMemoryReviewCache

NOW = 1_700_000_000_000


def key(
    model: str = "m",
    text: str = "# A\n\nSome words.",
    heading: str = "A",
    part: int = 1,
    parts: int = 2,
    name: str = "a.md",
    rubric: Rubric | None = None,
) -> str:
    return chunk_key(model, build_messages(name, text, heading, part, parts, rubric), rubric)


def house(version: str = "1", words: str = "Flag marketing words.") -> Rubric:
    return Rubric("house", version, (Instruction("tone", text=words),))


def test_the_key_is_a_digest_of_what_decides_the_review_and_nothing_else():
    base = key()
    assert base == key() and len(base) == 64 and int(base, 16) >= 0
    others = [
        key(model="m2"),
        key(text="# A\n\nSome other words."),
        key(heading="B"),
        key(part=2),
        key(parts=3),
        key(name="b.md"),
        key(rubric=house()),
    ]
    assert len({base, *others}) == len(others) + 1  # each one changes the key
    assert key(rubric=house("1")) != key(rubric=house("2"))  # a new version, the same words
    assert key(rubric=house(words="Other words.")) != key(rubric=house())


def test_who_answers_is_the_model_at_its_server_without_credentials():
    assert answerer("m", None) == answerer("m", "https://api.openai.com/v1/") == "m at https://api.openai.com/v1"
    assert answerer("m", "https://user:secret@llm.example/v1") == "m at https://llm.example/v1"
    assert answerer("m", "http://a/v1") != answerer("m", "http://b/v1") != answerer("n", "http://b/v1")
    assert key(model=answerer("m", "http://a/v1")) != key(model=answerer("m", "http://b/v1"))


def test_the_key_follows_the_prompt_and_schema_versions(monkeypatch):
    import docllm.domain.review.cache as rc

    base = key()
    monkeypatch.setattr(rc, "PROMPT_VERSION", rc.PROMPT_VERSION + 1)
    bumped = key()
    monkeypatch.setattr(rc, "SCHEMA_VERSION", rc.SCHEMA_VERSION + 1)
    assert len({base, bumped, key()}) == 3


def entry(k: str, task_id: int = 7, at: int = NOW) -> CachedChunk:
    return CachedChunk(k, {"findings": [], "summary": "ok"}, "m", None, task_id, at)


def test_a_recall_serves_its_hits_by_part_and_a_fresh_one_serves_nothing():
    hits = {"k1": entry("k1", 3), "k2": entry("k2", 4)}
    recall = Recall(hits=hits, parts={1: "k1", 2: "k2", 3: "k3"})
    assert recall.cached_parts == {1, 2}
    assert recall.hit("k3", 3) is None and recall.hit("k2", 2) is not None and recall.hit("k1", 1) is not None
    assert recall.report_field() == [{"chunk": 1, "task_id": 3}, {"chunk": 2, "task_id": 4}]
    report = with_served({"summary": "x"}, recall)
    assert report["cached"] == recall.report_field() and with_served({"a": 1}, Recall()) == {"a": 1}
    fresh = Recall(hits=hits, fresh=True, parts={1: "k1"})
    assert fresh.cached_parts == frozenset() and fresh.hit("k1", 1) is None and fresh.served == {}


def test_a_recalls_answers_become_its_commits_entries_in_key_order():
    recall = Recall()
    recall.answer("kb", {"findings": [], "summary": "b"}, "m", "east", {"prompt_tokens": 9, "completion_tokens": 2})
    recall.answer("ka", {"findings": [], "summary": "a"}, "m", None, {})
    entries = recall.entries(12, NOW)
    assert [e.key for e in entries] == ["ka", "kb"]
    assert entries[1] == CachedChunk("kb", {"findings": [], "summary": "b"}, "m", "east", 12, NOW, 9, 2)


def task(document: str, fresh: bool = False) -> Task:
    return Task(1, "a.md", TaskStatus.processing, attempt=1, document=document, fresh=fresh)


class Counting(InMemoryReviewCache):
    def __init__(self, repo: InMemoryTaskRepository, fail: bool = False):
        super().__init__(repo)
        self.finds: list[int] = []
        self.sweeps: list[tuple[int, int, int]] = []
        self.fail = fail

    def find(self, keys: Any, since_ms: int, until_ms: int) -> dict[str, CachedChunk]:
        if self.fail:
            raise Unavailable("database down")
        self.finds.append(since_ms)
        return super().find(keys, since_ms, until_ms)

    def sweep(self, before_ms: int, after_ms: int, limit: int) -> int:
        self.sweeps.append((before_ms, after_ms, limit))
        return super().sweep(before_ms, after_ms, limit)


DOC = "\n".join(f"# S{i}\n\n" + "words " * 30 for i in range(4))


def test_a_recall_reads_every_chunk_once_and_knows_which_parts_it_holds():
    repo = InMemoryTaskRepository()
    cache = Counting(repo)
    memory = ReviewMemory(cache, "m", 200, days=2)
    keys = memory.keys("a.md", DOC, None)
    assert len(keys) == 4
    repo.cache_entries[keys[2]] = entry(keys[2])
    recall = memory.recall(task(DOC), None, NOW)
    assert recall is not None and recall.cached_parts == {3} and cache.finds == [NOW - 2 * DAY_MS]
    assert memory.recall(task(DOC, fresh=True), None, NOW) == Recall(fresh=True)  # nothing read
    assert len(cache.finds) == 1


def test_a_recall_that_cannot_read_the_cache_lets_the_review_go_on_without_it():
    memory = ReviewMemory(Counting(InMemoryTaskRepository(), fail=True), "m", 200, days=2)
    assert memory.recall(task(DOC), None, NOW) is None
    assert memory.recall(task("\x00 binary"), None, NOW) is None  # the review itself says why


def test_expiry_sweeps_one_bounded_page_at_most_once_per_interval():
    repo = InMemoryTaskRepository()
    cache = Counting(repo)
    for i in range(1200):
        repo.cache_entries[f"{i:064x}"] = entry(f"{i:064x}", at=NOW - 3 * DAY_MS)
    memory = ReviewMemory(cache, "m", 200, days=2, sweep_every_ms=60_000, sweep_limit=500)
    memory.recall(task(DOC), None, NOW)
    memory.recall(task(DOC), None, NOW + 59_999)
    assert cache.sweeps == [(NOW - 2 * DAY_MS, NOW + AHEAD_MS, 500)] and len(repo.cache_entries) == 700
    memory.recall(task(DOC), None, NOW + 60_000)
    assert len(cache.sweeps) == 2 and len(repo.cache_entries) == 200


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DOCLLM_REVIEW_CACHE": "maybe"}, "DOCLLM_REVIEW_CACHE"),
        ({"DOCLLM_REVIEW_CACHE_DAYS": "0"}, "DOCLLM_REVIEW_CACHE_DAYS"),
        ({"DOCLLM_REVIEW_CACHE_DAYS": "-1"}, "DOCLLM_REVIEW_CACHE_DAYS"),
        ({"DOCLLM_REVIEW_CACHE_DAYS": "nan"}, "DOCLLM_REVIEW_CACHE_DAYS"),
        ({"DOCLLM_REVIEW_CACHE_DAYS": "4000"}, "DOCLLM_REVIEW_CACHE_DAYS"),
        ({"DOCLLM_REVIEW_CACHE_DAYS": "a week"}, "DOCLLM_REVIEW_CACHE_DAYS"),
    ],
)
def test_a_bad_cache_setting_stops_the_start_naming_it(env, named):
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env)


def test_the_settings_default_to_on_for_thirty_days_and_read_off():
    assert (Settings.from_env({}).review_cache, Settings.from_env({}).review_cache_days) == (True, 30.0)
    off = Settings.from_env({"DOCLLM_REVIEW_CACHE": "off", "DOCLLM_REVIEW_CACHE_DAYS": "0.5"})
    assert (off.review_cache, off.review_cache_days) == (False, 0.5)


def memory_of(env: dict[str, str]) -> ReviewMemory | None:
    c = Container()
    c.settings.override(providers.Object(Settings.from_env(env)))
    return c.review_memory()


LLM = {"DOCLLM_LLM_PROVIDER": "openai", "DOCLLM_LLM_MODEL": "gpt-x", "DOCLLM_LLM_API_KEY": "sk-test"}


def test_the_container_builds_the_cache_for_the_llm_reviewer_only(tmp_path):
    db = {"DOCLLM_DATABASE_URL": f"sqlite:///{tmp_path / 'd.db'}"}
    on = memory_of({**LLM, **db})
    assert on is not None and on.answered_by == "gpt-x at https://api.openai.com/v1" and on.max_age_ms == 30 * DAY_MS
    assert memory_of({**LLM, **db, "DOCLLM_REVIEW_CACHE": "off"}) is None
    assert memory_of(db) is None  # the offline checks cost nothing
    deployments = [
        {"name": "west", "base_url": "http://127.0.0.1:9/v1", "model": "second", "order": 2, "api_key": "k"},
        {"name": "east", "base_url": "http://127.0.0.1:9/v1", "model": "first", "order": 1, "api_key": "k"},
    ]
    routed = memory_of({**db, "DOCLLM_LLM_PROVIDER": "openai", "DOCLLM_LLM_DEPLOYMENTS": json.dumps(deployments)})
    assert routed is not None and routed.answered_by == "first at http://127.0.0.1:9/v1"  # where chunks go first


def test_a_reports_cached_field_is_read_back_and_checked():
    report = {
        "findings": [],
        "summary": "",
        "reviewer": "openai",
        "model": "m",
        "chunks": 2,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "prompt_version": 1,
        "schema_version": 1,
        "rubric_version": None,
    }
    assert "cached" not in validate_report(report)  # older reports read as they did
    served = [{"chunk": 2, "task_id": 17}]
    assert validate_report({**report, "cached": served})["cached"] == served
    for bad in ("yes", [{"chunk": 0}], [{"chunk": 1, "task_id": -1}], [{"chunk": True, "task_id": 1}]):
        with pytest.raises(ValueError, match="cached"):
            validate_report({**report, "cached": bad})


def test_a_recall_counts_only_the_entries_it_can_serve():
    repo = InMemoryTaskRepository()
    memory = ReviewMemory(InMemoryReviewCache(repo), "m", 200, days=2)
    keys = memory.keys("a.md", DOC, None)
    repo.cache_entries[keys[0]] = entry(keys[0])
    bad = CachedChunk(keys[1], {"findings": [{"category": "nonsense"}], "summary": ""}, "m", None, 7, NOW)
    repo.cache_entries[keys[1]] = bad
    recall = memory.recall(task(DOC), None, NOW)
    assert recall is not None and recall.cached_parts == {1} and set(recall.hits) == {keys[0]}


def test_a_batch_member_writes_only_what_a_realtime_review_would_ask_now():
    from docllm.domain.batches.lines import request_lines
    from docllm.domain.batches.results import ChunkAnswer, Tokens
    from docllm.domain.review.chunking import split_markdown
    from docllm.domain.review.memory import Asked, asked_digest, batch_recall
    from docllm.domain.review.rubric import RequiredSections

    chunks = split_markdown(DOC, 200)
    answers = [ChunkAnswer(i, {"findings": [], "summary": str(i)}, Tokens(10, 0, 2)) for i in range(len(chunks))]

    def recorded(rubric: Rubric | None, model: str = "m", url: str = "http://llm/v1") -> str:
        """What the batcher records for the member (the bodies of its lines)."""
        lines = request_lines(7, 1, "a.md", DOC, rubric, model, 200)
        return asked_digest(answerer(model, url), rubric, [line["body"] for line in lines])

    asked = Asked("a.md", house("2"), "m", "http://llm/v1", "east", "acme")
    recall = batch_recall(asked, chunks, answers, recorded(house("2")))
    assert recall is not None and len(recall.answered) == len(chunks) and recall.scope == "acme"
    assert batch_recall(asked, chunks, answers, recorded(house("1"))) is None  # the rubric changed meanwhile
    assert batch_recall(asked, chunks, answers, recorded(house("2"), model="m-old")) is None  # the model did
    assert batch_recall(asked, chunks, answers, recorded(house("2"), url="http://old/v1")) is None  # the server
    assert batch_recall(asked, chunks, answers, None) is None  # a batch recorded before 0011
    plain = Rubric("plain", "3", (RequiredSections("sections", sections=("Install",)),))
    older = Rubric("plain", "2", (RequiredSections("sections", sections=("Install",)),))
    no_words = Asked("a.md", plain, "m", None, None, None)
    # A rubric without instructions: the same messages, yet its version is in the digest.
    assert batch_recall(no_words, chunks, answers, recorded(older, url="")) is None
    assert batch_recall(no_words, chunks, answers, recorded(plain, url="")) is not None
