"""``docllm stats --watch``: a live terminal view of depths, rates and the oldest processing task."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.live import Live
from rich.table import Table


def _view(stats: dict[str, Any], previous: dict[str, Any] | None, elapsed: float) -> Table:
    table = Table(title="docllm (Ctrl-C to quit)")
    for col in ("what", "now", "per second"):
        table.add_column(col, justify="right" if col != "what" else "left")
    for group in ("tasks", "queue"):
        for key, value in stats[group].items():
            rate = ""
            if previous is not None and elapsed > 0:
                rate = f"{(value - previous[group][key]) / elapsed:+.1f}"
            table.add_row(f"{group} {key}", str(value), rate)
    oldest = stats["oldest_processing_s"]
    table.add_row("oldest processing (s)", "-" if oldest is None else f"{oldest:.1f}", "")
    return table


def watch_stats(read: Callable[[], dict[str, Any]], interval: float = 1.0, iterations: int = 0) -> None:
    """Refresh every ``interval`` seconds; ``iterations`` > 0 stops after that many (for tests)."""
    previous, last = None, time.monotonic()
    stats = read()
    with Live(_view(stats, None, 0.0), refresh_per_second=4) as live:
        n = 0
        while iterations <= 0 or n < iterations:
            n += 1
            time.sleep(interval)
            previous, stats = stats, read()
            now = time.monotonic()
            live.update(_view(stats, previous, now - last))
            last = now
