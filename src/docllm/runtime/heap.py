"""The cyclic garbage collector set for a long-running worker process (issue 24).

Measured at C = 1,024 (docs/BENCHMARKS.md at 7a00685, "The run of 2026-12-06, afternoon"): with the
interpreter's default thresholds a worker spent a quarter of its CPU in the collector (4.4 s of
17.8). A thousand attempts in flight leave survivors in every young collection, so each walks them
again, and the older generations fill and are walked too. What it found then was little: the
cycles of SQL statements built per write (since built once per shape); everything else is freed by
reference counting.

So, once the process is built: what start-up made goes to the permanent generation (``gc.freeze``:
never walked again), and a young collection waits for 50,000 new objects instead of 700.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 10)  # young, then the older generations in young collections (as the defaults count)


def settle() -> None:
    """Once, when the process is built and before it claims; never in a process that embeds docllm."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
