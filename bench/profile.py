"""3 (what bounds it). A sampling profile of the whole worker while it drains N tasks.

py-spy (``pip install py-spy``; it samples every thread of another process) records the worker
process of one ``run_docllm`` run with ``--gil``: only the thread holding the GIL is sampled, so
the samples are where the process spends its one core of Python. When py-spy is missing the
profile is skipped, and the run says so.
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import time
from pathlib import Path

from bench.common import Env, Table
from bench.worker import backends, run_docllm

RATE = 250
COMPONENTS = (  # first match wins, from the leaf up
    ("pymysql", "pymysql/"),
    (
        "DB-API call (sqlite3 C code)",
        "sqlalchemy/engine/default.py",
    ),  # do_execute/do_commit with no Python driver frame below
    ("SQLAlchemy", "sqlalchemy/"),
    ("redis-py", "redis/"),
    ("docllm events/logging", "docllm/adapters/telemetry/log_events.py"),
    ("docllm metrics", "docllm/adapters/telemetry/metrics.py"),
    ("threading", "threading.py"),
    ("uuid", "uuid.py"),
    ("json", "json/"),
)


def py_spy() -> str | None:
    return shutil.which("py-spy")


def record(pid: int, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "-o",
            str(out),
            "--rate",
            str(RATE),
            "--gil",
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def parse(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        try:
            stacks.append((stack.split(";"), int(count)))
        except ValueError:
            continue
    return stacks


def summarise(stacks: list[tuple[list[str], int]], top: int = 12) -> dict:
    total = sum(n for _, n in stacks) or 1
    inclusive: collections.Counter = collections.Counter()
    leaf: collections.Counter = collections.Counter()
    parts: collections.Counter = collections.Counter()
    for frames, n in stacks:
        for f in set(frames):
            if "docllm/" in f and "docllm_worker" not in f:
                inclusive[_short(f)] += n
        leaf[_short(frames[-1])] += n
        parts[_component(frames)] += n
    pct = lambda c: [(k, 100.0 * v / total) for k, v in c.most_common(top)]  # noqa: E731
    return {"samples": total, "docllm_inclusive": pct(inclusive), "leaf": pct(leaf), "components": pct(parts)}


def _short(frame: str) -> str:
    return frame.replace("/site-packages/", "/").split(" (")[0] + (
        " (" + frame.split(" (", 1)[1].split("/")[-1] if " (" in frame else ""
    )


def _component(frames: list[str]) -> str:
    for f in reversed(frames):
        for name, needle in COMPONENTS:
            if needle in f:
                return name
        if "docllm/" in f:
            return "docllm (own code)"
    return "other"


def profile_run(env: Env, backend: str, concurrency: int, n: int) -> dict:
    out = env.dir / f"profile-{backend}-c{concurrency}.txt"
    spy: list[subprocess.Popen] = []

    def during(pid: int):
        spy.append(record(pid, out))
        time.sleep(0.3)

        def finish() -> None:
            spy[0].send_signal(signal.SIGINT)
            spy[0].wait(60)

        return finish

    result = run_docllm(env, backend, concurrency, n, during=during)
    result["profile"] = summarise(parse(out)) if out.exists() else None
    return result


def run(env: Env, results: dict) -> list[Table]:
    if py_spy() is None:
        env.skip("profile of the whole worker: py-spy is not installed (pip install py-spy)")
        return []
    n = 300 if env.quick else 3000  # quick: still long enough for py-spy to take samples (60 once gave none)
    profiles = {}
    tables = []
    for backend in backends(env):
        r = profile_run(env, backend, 8, n)
        profiles[backend] = r
        prof = r["profile"]
        if prof is None:
            env.skip(f"profile {backend}: py-spy wrote nothing")
            continue
        t = Table(
            f"profile_{backend}",
            f"3b. Profile: docllm worker, {backend}, DOCLLM_CONCURRENCY=8, N={n} "
            f"({r['tasks_per_s']:.0f} tasks/s under py-spy; worker CPU {r['worker_cpu_share']:.2f} cores)",
            ["rank", "where the GIL-holding thread is (inclusive, docllm frames)", "%", "by library (leaf up)", "% "],
        )
        inc, comp = prof["docllm_inclusive"], prof["components"]
        for i in range(max(len(inc), len(comp))):
            a = inc[i] if i < len(inc) else ("", None)
            b = comp[i] if i < len(comp) else ("", None)
            t.add(i + 1, a[0], a[1], b[0], b[1])
        t.note(f"{prof['samples']} samples at {RATE} Hz, py-spy --gil --nonblocking.")
        t.note("Top leaf frames: " + "; ".join(f"{k} {v:.1f}%" for k, v in prof["leaf"][:6]))
        tables.append(t)
    results["profile"] = {b: r["profile"] for b, r in profiles.items()}
    return tables
