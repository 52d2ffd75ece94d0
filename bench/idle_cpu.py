"""An idle worker blocks, it does not spin: CPU of one worker process with an empty queue.

    python -m bench.idle_cpu [--seconds 30] [--concurrency 4]

Starts its own redis-server (tests/servers), a worker with its reaper and reconciler threads on a
SQLite file, waits 5 s for it to settle, then reads utime+stime from /proc over the window.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.servers import RedisServer  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(seconds: float, concurrency: int) -> float:
    """Percent of one core the idle worker used over ``seconds``."""
    with tempfile.TemporaryDirectory() as tmp, RedisServer() as redis:
        env = {
            **os.environ,
            "DOCLLM_REDIS_URL": redis.url,
            "DOCLLM_DATABASE_URL": f"sqlite:///{tmp}/d.db",
            "DOCLLM_LOG_LEVEL": "WARNING",
            "DOCLLM_CONCURRENCY": str(concurrency),
        }
        worker = subprocess.Popen([sys.executable, "-m", "docllm.entrypoints.worker"], env=env)
        try:
            time.sleep(5)
            used, start = cpu_seconds(worker.pid), time.monotonic()
            time.sleep(seconds)
            return 100 * (cpu_seconds(worker.pid) - used) / (time.monotonic() - start)
        finally:
            worker.terminate()
            worker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    share = measure(args.seconds, args.concurrency)
    print(
        f"idle worker, DOCLLM_CONCURRENCY={args.concurrency}: {share:.2f}% of one core over {args.seconds:g} s "
        f"(goal < 2%: {'MET' if share < 2 else 'NOT MET'})"
    )


if __name__ == "__main__":
    main()
