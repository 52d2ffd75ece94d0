"""When the worker sends its requests: each round of C requests' spread, from the mock LLM's log
of arrivals (issue 24's bursts: when C answers arrive together, the next C requests should go as
each answer is handled, not after the whole burst).

    python -m bench timeline --c 1024 --latency 5                 # this checkout
    python -m bench timeline --c 1024 --latency 5 --before-src OLD/src   # and another src/, alternating

N = 4C tasks, one worker process. Per run: tasks/s, its share of C/L, and for each round k (the
k-th C arrivals in time order) the first, median and last arrival in seconds after the first
request, and the round's lag: its median minus k * L (0 when every request of a round goes the
moment its previous answer arrives, at most the time the worker takes to handle a burst).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.common import Env, Table
from bench.llm import docllm_run
from bench.llm_mock_client import MockLLM


def rounds(arrivals: list[float], c: int, latency: float) -> list[dict[str, float]]:
    times = sorted(arrivals)
    if not times:
        return []
    t0 = times[0]
    out = []
    for k in range(0, len(times), c):
        part = [t - t0 for t in times[k : k + c]]
        median = statistics.median(part)
        out.append({"first": part[0], "median": median, "last": part[-1], "lag": median - (k // c) * latency})
    return out


def run(env: Env, results: dict) -> list[Table]:
    o = env.options
    cs = o.get("hp_c") or ([16] if env.quick else [1024])
    latency = (o.get("hp_latency") or ([0.2] if env.quick else [5.0]))[0]
    repeats = o.get("hp_repeats") or 1
    before_src = o.get("before_src")
    sides: list[tuple[str, str | None]] = [("this checkout", None)]
    if before_src:
        sides.append(("before", str(Path(before_src).resolve())))
    t = Table(
        "timeline",
        f"Issue 24: request rounds at L = {latency:g} s, N = 4C (seconds after the first request)",
        ["repeat", "C", "worker", "tasks/s", "/ (C/L)", "round", "first", "median", "last", "lag"],
    )
    found: list[dict[str, Any]] = []
    with MockLLM(latency, env.dir / "timeline-mock.log") as mock:
        for rep in range(repeats):
            for c in cs:
                order = sides if rep % 2 == 0 else sides[::-1]
                for label, src in order:
                    mock.reset()
                    extra = {"PYTHONPATH": src} if src else {}
                    r = docllm_run(env, mock, c, 4 * c, 30 + 60 * latency, **extra)
                    rs = rounds(mock.arrivals(), c, latency)
                    found.append({"repeat": rep, "c": c, "side": label, "per_s": r.get("per_s"), "rounds": rs})
                    for k, part in enumerate(rs):
                        t.add(
                            rep + 1,
                            c,
                            label,
                            r.get("per_s") if k == 0 else "",
                            r.get("ratio") if k == 0 else "",
                            k + 1,
                            part["first"],
                            part["median"],
                            part["last"],
                            part["lag"],
                        )
                    print(
                        f"   rep {rep} C={c} {label}: {r.get('per_s', 0):.0f}/s, lags "
                        + ", ".join(f"{p['lag']:.2f}" for p in rs),
                        flush=True,
                    )
    results["timeline"] = found
    return [t]
