"""The review cache as an attempt uses it (issue 46; the rules are ``domain/review/cache.py``).

Before a review sends anything, ``ReviewMemory.recall`` splits the document as the reviewer will,
keys every chunk's request (``chunk_key``: the model and server the chunks go to first, the
messages as the prompt builds them) and reads the entries of those keys in one call. The attempt then reserves
spend for the chunks not found only (I16: a hit costs nothing), and the reviewer serves the found
ones without a request (``Recall.hit``). What the LLM answered is written by the commit, in its own
transaction (``FencedWrite.cache``): only a report that committed is ever served (I17).

Expiry is bounded work: an entry older than ``DOCLLM_REVIEW_CACHE_DAYS`` is never served (the read
says so), and at most once a minute per process a recall also removes one page of such entries.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from docllm.domain.batches.results import ChunkAnswer
from docllm.domain.errors import PermanentError
from docllm.domain.review.answer_schema import SCHEMA_VERSION
from docllm.domain.review.cache import DAY_MS, KEY_VERSION, CachedChunk, Recall, answerer, chunk_key
from docllm.domain.review.chat import RUNGS, chat_body
from docllm.domain.review.chunking import Chunk, split_markdown
from docllm.domain.review.ports import ReviewCache
from docllm.domain.review.prompt import PROMPT_VERSION, build_messages
from docllm.domain.review.report import require_reviewable, validate_answer
from docllm.domain.review.rubric import Rubric
from docllm.domain.tasks.model import Task

SWEEP_EVERY_MS = 60_000  # per process: one page of expired entries removed at most this often
SWEEP_LIMIT = 500  # entries a sweep removes at most (one indexed range, one DELETE)
# An entry stamped further ahead of now than this was stamped by an authority clock that stepped
# back since: its age is unknown, so it is neither served nor kept.
AHEAD_MS = 60_000


class ReviewMemory:
    def __init__(
        self,
        cache: ReviewCache,
        answered_by: str,
        max_chunk_chars: int,
        days: float,
        sweep_every_ms: int = SWEEP_EVERY_MS,
        sweep_limit: int = SWEEP_LIMIT,
    ):
        """``answered_by``: ``cache.answerer`` of where the reviewer's chunks go first (a chunk
        another model or server answered is kept under its key, and never served for this one)."""
        self.cache, self.answered_by, self.max_chunk_chars = cache, answered_by, max_chunk_chars
        self.max_age_ms = int(days * DAY_MS)
        self._sweep_every_ms, self._sweep_limit = sweep_every_ms, sweep_limit
        self._next_sweep_ms: int | None = None
        self._lock = threading.Lock()

    def keys(self, task_name: str, document: str, rubric: Rubric | None, scope: str | None = None) -> list[str]:
        """Each chunk's key, in chunk order, as the reviewer will ask for it (``scope``: the tenant's)."""
        chunks = split_markdown(require_reviewable(document), self.max_chunk_chars)
        n = len(chunks)
        return [
            chunk_key(self.answered_by, build_messages(task_name, c.text, c.heading, i, n, rubric), rubric, scope)
            for i, c in enumerate(chunks, 1)
        ]

    def recall(self, task: Task, rubric: Rubric | None, now_ms: int) -> Recall | None:
        """The attempt's recall (blocking: a database read). A ``fresh`` task finds nothing and its
        answers replace the entries. None when the cache cannot be read (the review goes on without
        it) or no reviewer could review the document (the review says why)."""
        if task.fresh:
            return Recall(fresh=True, scope=task.tenant)
        try:
            keys = self.keys(task.task_name or "", task.document or "", rubric, task.tenant)
        except PermanentError:
            return None
        try:
            hits = self.cache.find(keys, now_ms - self.max_age_ms, now_ms + AHEAD_MS)
        except Exception:  # noqa: BLE001 - a cache that cannot be read is no cache: never the document's fault
            return None
        self._sweep(now_ms)
        return Recall(hits=_servable(hits), scope=task.tenant, parts={i: k for i, k in enumerate(keys, 1)})

    def _sweep(self, now_ms: int) -> None:
        with self._lock:
            due = self._next_sweep_ms is None or now_ms >= self._next_sweep_ms
            if due:
                self._next_sweep_ms = now_ms + self._sweep_every_ms
        if not due:
            return
        try:
            self.cache.sweep(now_ms - self.max_age_ms, now_ms + AHEAD_MS, self._sweep_limit)
        except Exception:  # noqa: BLE001 - the next sweep takes them; an expired entry is never served meanwhile
            pass


def _servable(found: dict[str, CachedChunk]) -> dict[str, CachedChunk]:
    """The entries this version can serve, their answers checked as a model's are
    (``report.validate_answer``): one it cannot read is asked again, so it is reserved as any
    request is (the spend ledger counts the recall's hits as costing nothing)."""
    kept = {}
    for key, entry in found.items():
        try:
            kept[key] = replace(entry, answer=validate_answer(entry.answer))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return kept


@dataclass(frozen=True)
class Asked:
    """What a batch member's realtime review would be asked with now."""

    task_name: str
    rubric: Rubric | None
    model: str
    base_url: str | None
    deployment: str | None
    scope: str | None  # the task's tenant


def asked_digest(answered_by: str, rubric: Rubric | None, bodies: Sequence[Mapping[str, Any]]) -> str:
    """The digest of what a batch member's lines ask (their request bodies: the model, the messages)
    and of what else a chunk's key holds (who answers, the versions, the rubric's name and version):
    the batcher records it with the member, the poller compares it with the same digest made now."""
    asked = {
        "key": KEY_VERSION,
        "answerer": answered_by,
        "prompt_version": PROMPT_VERSION,
        "schema_version": SCHEMA_VERSION,
        "rubric": None if rubric is None else [rubric.ref, rubric.version],
        "bodies": list(bodies),
    }
    text = json.dumps(asked, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def batch_recall(
    asked: Asked, chunks: Sequence[Chunk], answers: Sequence[ChunkAnswer], recorded: str | None
) -> Recall | None:
    """A batch member's answers, for its commit to write as a realtime review's are; None (write
    nothing) unless what its lines asked (``recorded``: ``asked_digest`` when the batch was made) is
    what a realtime review would ask now: a rubric edited or a model changed while the batch ran
    must not be served the old answers, and a batch recorded before the digest was kept writes
    nothing. The batch lane does not read the cache: a bulk task's chunks all go to its batch."""
    rubric, n = asked.rubric, len(chunks)
    messages = [build_messages(asked.task_name, c.text, c.heading, i, n, rubric) for i, c in enumerate(chunks, 1)]
    answered_by = answerer(asked.model, asked.base_url)
    now = asked_digest(answered_by, rubric, [chat_body(asked.model, m, RUNGS[0]) for m in messages])
    if recorded is None or recorded != now:
        return None
    recall = Recall(scope=asked.scope)
    for a in answers:
        usage = {"prompt_tokens": a.tokens.prompt, "completion_tokens": a.tokens.completion}
        recall.answer(
            recall.key(answered_by, messages[a.chunk], rubric), a.answer, asked.model, asked.deployment, usage
        )
    return recall
