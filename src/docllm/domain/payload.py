"""Parsing queue payloads. Kept strict: anything odd goes to the dead-letter list with a reason."""

from __future__ import annotations

import json

from docllm.domain.errors import BadPayload
from docllm.domain.model import TaskRef


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
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadPayload(f"payload is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadPayload("payload is not a JSON object")
    if "task_id" not in data:
        raise BadPayload("payload has no task_id")
    task_id = data["task_id"]
    # bool is an int in Python; "7" is what some producers send and is unambiguous.
    if isinstance(task_id, bool):
        raise BadPayload(f"task_id is not an integer: {task_id!r}")
    if isinstance(task_id, str) and task_id.strip().lstrip("-").isdigit():
        task_id = int(task_id)
    if not isinstance(task_id, int):
        raise BadPayload(f"task_id is not an integer: {task_id!r}")
    if task_id <= 0:
        raise BadPayload(f"task_id is not positive: {task_id}")
    name = data.get("task_name")
    return TaskRef(task_id=task_id, task_name=name if isinstance(name, str) else None)


def make_payload(task_id: int, task_name: str | None) -> str:
    """The payload existing producers push, byte-compatible with the original note."""
    return json.dumps({"task_id": task_id, "task_name": task_name}, ensure_ascii=False)
