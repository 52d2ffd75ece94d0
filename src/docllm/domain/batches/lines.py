"""What a batch sends: one Batch API line per chunk of a task's attempt (docs/ARCHITECTURE.md, the
batch lane), each named by a ``custom_id`` that carries task, attempt and chunk, so the results can
be matched back without any other record. ``batch_results.read_results`` reads what comes back.

A line's body is the realtime reviewer's (``chat.chat_body``), asked on the strictest rung
(``chat.RUNGS[0]``): a batch cannot step down a rung mid-request, so a server that refuses it
fails the lines with a 400 about ``response_format``, which ``batch_results`` does not charge to
the documents.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from docllm.domain.review.chat import RUNGS, chat_body
from docllm.domain.review.chunking import split_markdown
from docllm.domain.review.prompt import build_messages
from docllm.domain.review.report import require_reviewable
from docllm.domain.review.rubric import Rubric

ENDPOINT = "/v1/chat/completions"
PREFIX = "docllm"
_CUSTOM_ID = re.compile(r"docllm:(0|[1-9][0-9]*):(0|[1-9][0-9]*):(0|[1-9][0-9]*)")


class LineId(NamedTuple):
    task_id: int
    attempt: int
    chunk: int  # 0-based index into the task's chunks


def custom_id(task_id: int, attempt: int, chunk: int) -> str:
    """``docllm:{task_id}:{attempt}:{chunk}``; ValueError for a negative or non-integer part."""
    for name, value in (("task_id", task_id), ("attempt", attempt), ("chunk", chunk)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return f"{PREFIX}:{task_id}:{attempt}:{chunk}"


def parse_custom_id(text: object) -> LineId:
    """The parts of a ``custom_id`` that ``custom_id`` wrote, exactly as it writes them (no sign,
    no leading zero, no space); ValueError saying what was expected for anything else."""
    match = _CUSTOM_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        shown = repr(text)[:80]
        raise ValueError(f"custom_id {shown} is not docllm's: expected 'docllm:TASK_ID:ATTEMPT:CHUNK' (integers >= 0)")
    task_id, attempt, chunk = (int(g) for g in match.groups())
    return LineId(task_id, attempt, chunk)


def request_lines(
    task_id: int,
    attempt: int,
    task_name: str,
    document: str,
    rubric: Rubric | None,
    model: str,
    max_chars: int,
) -> list[dict[str, Any]]:
    """The task's Batch API input lines, one per chunk in chunk order: the chunks, messages and body
    the realtime reviewer would send (``OpenAIReviewer.review``). PermanentError for a document no
    reviewer could review (empty, binary), as in realtime."""
    chunks = split_markdown(require_reviewable(document), max_chars)
    n = len(chunks)
    return [
        {
            "custom_id": custom_id(task_id, attempt, i),
            "method": "POST",
            "url": ENDPOINT,
            "body": chat_body(model, build_messages(task_name, c.text, c.heading, i + 1, n, rubric), RUNGS[0]),
        }
        for i, c in enumerate(chunks)
    ]
