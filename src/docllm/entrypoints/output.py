"""What the CLI's commands share: how they print, and the error the user can act on.

Its own module so that ``cli`` (which dispatches to ``commands``) and ``commands`` import it,
not each other."""

from __future__ import annotations

import json
import sys

from rich.console import Console


class CommandError(Exception):
    """A failure the user can act on: printed as one line on stderr, exit 1."""


def print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=None) + "\n")


def console() -> Console:
    return Console()
