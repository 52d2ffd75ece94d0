"""The OpenAI-compatible test server (``tests.support.llm_server``) as a process of the harness."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tests.e2e.harness.process import Proc
from tests.e2e.harness.programs import Harness
from tests.e2e.harness.waiting import wait_until


def start_llm_server(
    harness: Harness,
    name: str = "llm",
    latency_ms: str = "0-0",
    rate_429: float = 0.0,
    rate_500: float = 0.0,
    seed: int = 1,
    port: int = 0,
    extra: Sequence[str] = (),
) -> tuple[Proc, int]:
    """``python -m tests.support.llm_server`` as a process; returns it and its port. ``extra``: more
    flags, e.g. the batch knobs (``--batch-delay-s 0.5 --expire-batches at:2``)."""
    argv = [
        sys.executable,
        "-m",
        "tests.support.llm_server",
        "--port",
        str(port),
        "--latency-ms",
        latency_ms,
        "--rate-429",
        str(rate_429),
        "--rate-500",
        str(rate_500),
        "--seed",
        str(seed),
        *extra,
    ]
    proc = harness.spawn(name, argv, "llm")

    def port_printed() -> int | None:
        text = proc.log_text().strip().splitlines()
        return int(text[0]) if text and text[0].isdigit() else None

    return proc, wait_until(port_printed, 20, f"the LLM test server {name} to print its port", on_timeout=proc.tail)
