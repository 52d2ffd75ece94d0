"""Parsing queue payloads. Kept strict: anything odd goes to the dead-letter list with a reason."""

from __future__ import annotations

import json
import re
import sys

from docllm.domain.errors import BadPayload
from docllm.domain.model import TaskRef

MAX_TASK_ID = 2**53 - 1  # the queue's Lua scripts read task ids as doubles (lib.lua, task_id_of)
# "7" is what some producers send: ASCII digits only (str.isdigit also says yes to "²" and "٣").
_DECIMAL = re.compile(r"\s*0*([0-9]{1,16})\s*", re.ASCII)


def parse_payload(raw: str | bytes, max_bytes: int) -> TaskRef:
    """Turn ``{"task_id": 1, "task_name": "..."}`` into a TaskRef or raise BadPayload naming why."""
    try:  # adapters carry bytes that are not UTF-8 as surrogate escapes: those are malformed too
        data_bytes = raw.encode("utf-8") if isinstance(raw, str) else raw
        data_bytes.decode("utf-8")
    except UnicodeError:
        raise BadPayload("payload is not valid UTF-8") from None
    size = len(data_bytes)
    if size > max_bytes:
        raise BadPayload(f"payload of {size} bytes is over the limit of {max_bytes}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the stack
        raise BadPayload(f"payload is not JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise BadPayload("payload is not a JSON object")
    if "task_id" not in data:
        raise BadPayload("payload has no task_id")
    task_id = _integer(data["task_id"])
    if task_id <= 0:
        raise BadPayload(f"task_id is not positive: {task_id}")
    if task_id > MAX_TASK_ID:
        raise BadPayload(f"task_id is over the largest row id: {task_id}")
    name = data.get("task_name")
    return TaskRef(task_id=task_id, task_name=name if isinstance(name, str) else None)


def task_id_of(raw: str | bytes) -> int | None:
    """The task id a payload names, None for a malformed one; no size limit (for scans)."""
    try:
        return parse_payload(raw, max_bytes=sys.maxsize).task_id
    except BadPayload:
        return None


def _integer(value: object) -> int:
    # bool is an int in Python: true is not a task id.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and (match := _DECIMAL.fullmatch(value)):
        return int(match.group(1))
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "..."
    raise BadPayload(f"task_id is not an integer: {shown}")


def make_payload(task_id: int, task_name: str | None) -> str:
    """The payload existing producers push, byte-compatible with the original note."""
    return json.dumps({"task_id": task_id, "task_name": task_name}, ensure_ascii=False)
