"""The bad input a chaos run feeds in, and the checks expect in the dead-letter list."""

from __future__ import annotations

BIG_NAME = "big-10mb.md"
UNKNOWN_TASK_ID = 987654321
MALFORMED = [  # valid UTF-8 each; see test_bad_input.py for a payload that is not
    "not json at all",
    "",
    "[1, 2, 3]",
    '{"task_name": "no id"}',
    '{"task_id": "seven", "task_name": "x"}',
    '{"task_id": -4, "task_name": "negative"}',
    '{"task_id": 1.5}',
    '{"task_id": true}',
    f'{{"task_id": {UNKNOWN_TASK_ID}, "task_name": "no such row"}}',
    '{"task_id": 1, "padding": "' + "x" * 100_000 + '"}',  # over DOCLLM_MAX_PAYLOAD_BYTES
]
