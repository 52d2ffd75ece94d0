"""Waiting for a condition: a deadline and a message instead of ``sleep``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.1,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Call ``check`` until it returns something truthy (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except Exception as exc:  # noqa: BLE001 - a server restarting: keep trying until the deadline
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            extra = f"\n{on_timeout()}" if on_timeout else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}{extra}")
        time.sleep(interval)
