"""A task id given by the user (a CLI argument, a dashboard URL), checked once where it comes in.

Ids are a signed 64-bit BIGINT: a larger number is no id at all, and would not merely find no
row (SQLite's driver raises OverflowError on it)."""

from __future__ import annotations

MAX_TASK_ID = 2**63 - 1


class BadTaskId(Exception):
    """Not a ValueError on purpose: argparse would turn that into its multi-line usage message;
    ``cli.main`` prints this one as one line, exit 2."""


def parse_task_id(text: str) -> int:
    # ASCII digits only: int() would also take "+5", " 5", "5_0" and other scripts' digits.
    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= value <= MAX_TASK_ID:
        raise BadTaskId(f"argument TASK_ID: {text!r} is not a task id (a whole number from 1 to {MAX_TASK_ID})")
    return value
