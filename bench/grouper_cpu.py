"""``python -m bench.grouper_cpu [--before OLD/src] [--rounds 5]``: the CPU a ``runtime.grouper.Grouper``
costs per item when 32 threads (the worker's port threads) submit at once and each group takes a
1 ms round trip; with ``--before``, another src/'s grouper in the same rounds, in turn (a ratio).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

THREADS, EACH = 32, 300


def load(src: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, src / "docllm" / "runtime" / "grouper.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def one_round(module: ModuleType) -> tuple[float, float]:
    """(CPU microseconds per item, items per group)."""

    def send(items: list[int]) -> list[int]:
        time.sleep(0.001)
        return items

    grouper = module.Grouper(send)

    def caller() -> None:
        for i in range(EACH):
            grouper.submit(i)

    threads = [threading.Thread(target=caller) for _ in range(THREADS)]
    cpu = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu = time.process_time() - cpu
    return cpu * 1e6 / (THREADS * EACH), grouper.requests / grouper.groups


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grouper_cpu")
    parser.add_argument("--before", type=Path, help="another src/ directory")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sides = {"this checkout": load(Path(__file__).resolve().parents[1] / "src", "grouper_now")}
    if args.before:
        sides["before"] = load(args.before, "grouper_before")
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for k in range(args.rounds):
        for name in sides if k % 2 == 0 else reversed(list(sides)):
            found[name].append(one_round(sides[name]))
    for name, rounds in found.items():
        cpu = [r[0] for r in rounds]
        print(
            f"{name}: {statistics.median(cpu):.1f} us CPU per item (rounds {', '.join(f'{c:.1f}' for c in cpu)}), "
            f"{statistics.median(r[1] for r in rounds):.1f} items a group"
        )
    if args.before:
        ratios = [a[0] / b[0] for a, b in zip(found["this checkout"], found["before"], strict=True)]
        print(f"this checkout / before, same round: {', '.join(f'{r:.2f}' for r in ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
