"""What a batch's output and error files say about each member task (docs/batch lane, I15).

``read_results`` reads the lines of both files (OpenAI's format: ``{"id", "custom_id", "response":
{"status_code", "request_id", "body"}, "error"}``; an error-file line may have no response and
``error: {"code", "message"}``, ``batch_expired`` for a request the window closed on) and says per
member task, on its current attempt:

- ``answered``: every chunk has a 200 whose answer is a valid report (parsed and checked as the
  realtime reviewer's: ``report.parse_answer``); ``TaskResult.report`` merges them as realtime does.
- ``failed``: some chunk has a line that is not such an answer (its status and error, for
  ``batch_verdict``, which maps it to the verdict model's facts).
- ``missing``: no failure, but some chunk has no line at all (lost lines, an unreadable file).

Reading is idempotent: the same file read twice, or a line repeated, counts once; a second line
for the same custom_id with other content is a conflict, the first kept and noted. Lines of another
attempt or task (stale) are dropped and noted; a malformed line is rejected with its reason and the
others still count. Pure: the caller reads the files and commits.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from docllm.domain.batches.lines import parse_custom_id
from docllm.domain.llm.prices import Price, PriceTable
from docllm.domain.llm.usage import Usage
from docllm.domain.review.chat import chunk_report, content, reported_tokens
from docllm.domain.review.chunking import Chunk
from docllm.domain.review.report import merge_reports, parse_answer

Members = Mapping[int, tuple[int, int]]  # task_id -> (the attempt the batch runs, its number of chunks)


@dataclass(frozen=True)
class Tokens:
    prompt: int = 0
    cached: int = 0  # of prompt, served from the provider's cache
    completion: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.prompt + other.prompt, self.cached + other.cached, self.completion + other.completion)


@dataclass(frozen=True)
class ChunkAnswer:
    chunk: int
    answer: dict[str, Any]  # {"findings": [...], "summary": ...} as report.parse_answer returns it
    tokens: Tokens


@dataclass(frozen=True)
class ChunkFailure:
    chunk: int
    status: int | None  # the line's HTTP status (200: an answer that is not a valid report); None: no response
    code: str | None  # the error's code (``batch_expired``, ``context_length_exceeded``...), when given
    message: str
    param: str | None = None  # the error's param (``response_format``...), when given
    tokens: Tokens = Tokens()  # what an answered but invalid request used


class State(enum.StrEnum):
    answered = "answered"
    failed = "failed"
    missing = "missing"


@dataclass(frozen=True)
class TaskResult:
    task_id: int
    attempt: int
    chunks: int
    answers: tuple[ChunkAnswer, ...] = ()  # chunk order
    failures: tuple[ChunkFailure, ...] = ()  # chunk order

    @property
    def missing(self) -> tuple[int, ...]:
        """The chunks without any line."""
        seen = {a.chunk for a in self.answers} | {f.chunk for f in self.failures}
        return tuple(c for c in range(self.chunks) if c not in seen)

    @property
    def state(self) -> State:
        if self.failures:
            return State.failed
        return State.answered if len(self.answers) == self.chunks else State.missing

    @property
    def tokens(self) -> Tokens:
        """Every line's, answered or not: the provider charges both."""
        lines: list[ChunkAnswer | ChunkFailure] = [*self.answers, *self.failures]
        return sum((x.tokens for x in lines), Tokens())

    def report(self, chunks: Sequence[Chunk], model: str, deployment: str | None = None) -> dict[str, Any]:
        """The task's report: each chunk's answer placed in the document and the chunks merged, as the
        realtime reviewer does. ``chunks``: the document split as ``batch_lines.request_lines`` split it."""
        if self.state is not State.answered:
            raise ValueError(f"task {self.task_id} is {self.state.value}, not answered: it has no report")
        if len(chunks) != self.chunks:
            raise ValueError(f"task {self.task_id}: {len(chunks)} chunks given, the batch sent {self.chunks}")
        return merge_reports(
            [
                chunk_report(
                    a.answer,
                    chunks[a.chunk],
                    model,
                    {"prompt_tokens": a.tokens.prompt, "completion_tokens": a.tokens.completion},
                    deployment,
                )
                for a in self.answers
            ]
        )

    def usage(self, model: str, price: Price | None) -> Usage:
        """What the attempt used, at ``price`` (the batch price: ``prices.batch_price``); None: unpriced."""
        t = self.tokens
        calls = len(self.answers) + sum(1 for f in self.failures if f.status is not None)
        cost = None if price is None else PriceTable(((model, price),)).cost(model, t.prompt, t.completion, t.cached)
        return Usage(calls, t.prompt, t.completion, 0.0, model, cost, t.cached)


@dataclass(frozen=True)
class Dropped:
    line: int  # 1-based position in the lines read
    custom_id: str | None
    reason: str


@dataclass(frozen=True)
class BatchResults:
    tasks: dict[int, TaskResult]  # every member, in the members' order
    rejected: tuple[Dropped, ...] = ()  # malformed lines
    stale: tuple[Dropped, ...] = ()  # lines of another attempt, or of a task not in the batch
    conflicts: tuple[Dropped, ...] = ()  # a second, different line for a custom_id (the first is kept)
    duplicates: int = 0  # lines read again, ignored
    served: bool = False  # some line of the batch has a 200: the provider served it
    notes: tuple[str, ...] = field(default=())  # usage beyond belief, ignored

    def of(self, state: State) -> list[TaskResult]:
        return [t for t in self.tasks.values() if t.state is state]


def read_results(lines: Iterable[str | bytes | dict[str, Any]], members: Members) -> BatchResults:
    """Every member task's result from the lines of the output and error files (any order, any repeats)."""
    outcomes: dict[int, dict[int, ChunkAnswer | ChunkFailure]] = {t: {} for t in members}
    first: dict[str, dict[str, Any]] = {}
    rejected: list[Dropped] = []
    stale: list[Dropped] = []
    conflicts: list[Dropped] = []
    notes: list[str] = []
    duplicates = 0
    served = False
    for no, raw in enumerate(lines, 1):
        if isinstance(raw, str | bytes) and not raw.strip():
            continue  # the newline that ends a JSONL file
        cid = None
        try:
            line = _decode(raw)
            cid = line.get("custom_id")
            task_id, attempt, chunk = parse_custom_id(cid)
            if task_id not in members:
                stale.append(Dropped(no, cid, f"task {task_id} is not a member of this batch"))
                continue
            current, n = members[task_id]
            if attempt != current:
                stale.append(Dropped(no, cid, f"attempt {attempt} is stale: the batch runs attempt {current}"))
                continue
            if chunk >= n:
                raise ValueError(f"chunk {chunk} is out of range: task {task_id} was sent {n} chunk(s)")
            if cid in first:
                if first[cid] == line:
                    duplicates += 1
                else:
                    conflicts.append(Dropped(no, cid, "a second line for this custom_id differs: the first is kept"))
                continue
            outcome = _outcome(chunk, line, lambda why, c=cid: notes.append(f"{c}: {why}"))
        except ValueError as e:
            rejected.append(Dropped(no, cid if isinstance(cid, str) else None, str(e)))
            continue
        first[str(cid)] = line
        outcomes[task_id][chunk] = outcome
        served = served or (isinstance(outcome, ChunkAnswer) or outcome.status == 200)
    return BatchResults(
        {t: _task(t, a, n, outcomes[t]) for t, (a, n) in members.items()},
        tuple(rejected),
        tuple(stale),
        tuple(conflicts),
        duplicates,
        served,
        tuple(notes),
    )


def _task(task_id: int, attempt: int, n: int, found: dict[int, ChunkAnswer | ChunkFailure]) -> TaskResult:
    ordered = [found[c] for c in sorted(found)]
    answers = tuple(o for o in ordered if isinstance(o, ChunkAnswer))
    failures = tuple(o for o in ordered if isinstance(o, ChunkFailure))
    return TaskResult(task_id, attempt, n, answers, failures)


def _decode(raw: str | bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"not a JSON object but {type(raw).__name__}")
    return raw


def _outcome(chunk: int, line: dict[str, Any], note: Any) -> ChunkAnswer | ChunkFailure:
    """One well-formed line's answer or failure; ValueError when its shape is not the Batch API's."""
    response, error = line.get("response"), line.get("error")
    if response is None:
        if not isinstance(error, dict):
            raise ValueError("neither a response nor an error")
        return ChunkFailure(chunk, None, _text(error.get("code")), _text(error.get("message")) or "")
    if not isinstance(response, dict):
        raise ValueError("response is not an object")
    status, body = response.get("status_code"), response.get("body")
    if isinstance(status, bool) or not isinstance(status, int):
        raise ValueError(f"response.status_code is not an integer: {status!r}"[:200])
    if status != 200:
        said = body.get("error") if isinstance(body, dict) else None
        said = said if isinstance(said, dict) else {}
        message = _text(said.get("message")) or (_text(body) if not isinstance(body, dict) else None) or ""
        return ChunkFailure(chunk, status, _text(said.get("code")), message, _text(said.get("param")))
    if not isinstance(body, dict):
        return ChunkFailure(chunk, 200, "invalid_answer", "the answer's body is not a chat completion")
    counts = reported_tokens(body, lambda name, raw, value, high: _believed(name, raw, value, high, note))
    tokens = Tokens(counts[0], counts[2], counts[1]) if counts else Tokens()
    try:
        return ChunkAnswer(chunk, parse_answer(content(body)), tokens)
    except ValueError as e:
        return ChunkFailure(chunk, 200, "invalid_answer", f"the LLM answered an invalid report: {e}", tokens=tokens)


def _believed(name: str, raw: object, value: float, high: float, note: Any) -> float | None:
    if 0 <= value <= high:
        return value
    note(f"{name} of {raw!r}"[:200] + " is beyond belief: ignored")
    return None


def _text(value: object) -> str | None:
    return None if value is None else str(value)[:1000]
