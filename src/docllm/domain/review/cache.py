"""The review cache's pure rules (issue 46; the service is ``domain/review/memory.py``).

A chunk's review is decided by the request that asks for it: the messages as the prompt builds
them (the chunk's numbered text, its place: "Part 2 of 5", the heading path it starts under, the
task name, the rubric's instructions) and what reads them (the model at its server: ``answerer``;
the prompt's and the answer schema's versions, the rubric's name and version). ``chunk_key`` is a
digest of exactly those, so a cached answer is served only for a request that would have been the
same; anything else misses.

What is kept is the chunk's answer as the model gave it (findings with lines counted in the
chunk), so a chunk found again further down an edited document is placed where it is now.
The cache is written only by a commit that lands (``FencedWrite.cache``, in the commit's own
transaction): a review that never committed is never served (I17).

A running review finds its attempt's ``Recall`` in a context variable, as it finds its meter
(``llm.usage.metering``) and purse (``llm.spend_ledger.spending``): the reviewer asks it for a chunk
before sending one, and tells it each answer it parsed.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from docllm.domain.review.answer_schema import SCHEMA_VERSION
from docllm.domain.review.prompt import PROMPT_VERSION
from docllm.domain.review.rubric import Rubric

KEY_VERSION = 1  # bump when what goes into a key changes: every older entry then misses
REVIEWER = "openai"  # the one reviewer whose chunks are cached (the offline checks cost nothing)
CACHED_KEY = "cached"  # the report's list of the chunks served from the cache (absent: none was)
DAY_MS = 86_400_000
OPENAI_URL = "https://api.openai.com/v1"  # where the client sends a request when no base URL is set


def answerer(model: str, base_url: str | None) -> str:
    """Who answers a chunk's request: the model at the server it is sent to (the base URL without
    credentials or a trailing slash; none is OpenAI's own). Two deployments of one model at one URL
    (two keys, two accounts) answer alike; the same model name at another server may not."""
    where = re.sub(r"//[^/@]*@", "//", base_url).rstrip("/") if base_url else OPENAI_URL
    return f"{model} at {where}"


def chunk_key(
    answered_by: str, messages: Sequence[Mapping[str, str]], rubric: Rubric | None, scope: str | None = None
) -> str:
    """The digest of what decides a chunk's review (64 hex characters); ``answered_by``: ``answerer``'s;
    ``scope``: whose entries these are (the task's tenant; None: the tasks without one). Tenants
    share no entry: a report names the task its chunks came from, and no tenant learns of another's."""
    decided = {
        "key": KEY_VERSION,
        "scope": scope,
        "reviewer": REVIEWER,
        "answerer": answered_by,
        "prompt_version": PROMPT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "rubric": None if rubric is None else [rubric.ref, rubric.version],
        "messages": [[m["role"], m["content"]] for m in messages],
    }
    text = json.dumps(decided, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CachedChunk:
    """One chunk's answer as the cache keeps it: ``answer`` is ``{"findings", "summary"}`` with
    lines counted in the chunk; ``task_id`` the task whose committed report it came from;
    ``created_ms`` the authority clock's time of that commit; the tokens it cost then."""

    key: str
    answer: dict[str, Any]
    model: str
    deployment: str | None
    task_id: int
    created_ms: int
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Recall:
    """One attempt's use of the cache: what was found before the review (``hits``, by key), which
    chunks the review took from it (``served``: part -> source task), and the answers the review
    got from the LLM (``answered``, by key), which its commit writes. ``fresh``: the task asked for
    a new review (``docllm submit --fresh``): nothing is served, its answers replace the entries."""

    hits: dict[str, CachedChunk] = field(default_factory=dict)
    fresh: bool = False
    scope: str | None = None  # the task's tenant: its keys are its tenant's (``chunk_key``)
    parts: dict[int, str] = field(default_factory=dict)  # each chunk's key as the recall computed it
    served: dict[int, int] = field(default_factory=dict)
    answered: dict[str, tuple[dict[str, Any], str, str | None, int, int]] = field(default_factory=dict)

    def key(self, answered_by: str, messages: Sequence[Mapping[str, str]], rubric: Rubric | None) -> str:
        """A chunk's key for this attempt's task (in its tenant's scope)."""
        return chunk_key(answered_by, messages, rubric, self.scope)

    @property
    def cached_parts(self) -> frozenset[int]:
        """The chunks (1-based) the cache holds: the spend ledger reserves for the others only."""
        return frozenset(part for part, key in self.parts.items() if not self.fresh and key in self.hits)

    def hit(self, key: str, part: int) -> CachedChunk | None:
        """The cached answer of the chunk at ``part`` (1-based), noted as served; None: ask the LLM."""
        found = None if self.fresh else self.hits.get(key)
        if found is not None:
            self.served[part] = found.task_id
        return found

    def answer(
        self, key: str, answer: dict[str, Any], model: str, deployment: str | None, usage: Mapping[str, int]
    ) -> None:
        """An answer the LLM gave for the chunk of ``key`` (kept for the commit to write)."""
        tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        self.answered[key] = (answer, model, deployment, *tokens)

    def entries(self, task_id: int, now_ms: int) -> tuple[CachedChunk, ...]:
        """What a commit of this attempt writes: every answer it got, sorted by key (two commits
        write their common keys in one order)."""
        return tuple(
            CachedChunk(key, answer, model, deployment, task_id, now_ms, prompt, completion)
            for key, (answer, model, deployment, prompt, completion) in sorted(self.answered.items())
        )

    def report_field(self) -> list[dict[str, int]]:
        """The report's ``cached``: ``[{"chunk": 2, "task_id": 17}, ...]`` in chunk order."""
        return [{"chunk": part, "task_id": task_id} for part, task_id in sorted(self.served.items())]


def with_served(report: dict[str, Any], recall: Recall | None) -> dict[str, Any]:
    """The report with the chunks the cache served (``CACHED_KEY``), when it served any."""
    if recall is None or not recall.served:
        return report
    return {**report, CACHED_KEY: recall.report_field()}


_recall: contextvars.ContextVar[Recall | None] = contextvars.ContextVar("docllm_recall", default=None)


@contextmanager
def recalling(recall: Recall | None) -> Iterator[None]:
    """The running attempt's recall for the review inside (its chunk tasks inherit it)."""
    token = _recall.set(recall)
    try:
        yield
    finally:
        _recall.reset(token)


def current_recall() -> Recall | None:
    return _recall.get()
