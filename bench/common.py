"""Shared pieces of the benchmarks: tables, the machine, the servers, process sampling, waiting.

Every measurement module exposes ``run(env) -> list[Table]``; ``bench/__main__.py`` runs them in
order on one :class:`Env` (one redis-server, one MariaDB, one SQLite directory) and prints them.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `tests.servers` lives at the repo root, beside `bench`
    sys.path.insert(0, str(ROOT))

PYTHON = sys.executable


# -- tables ---------------------------------------------------------------------------------------


@dataclass
class Table:
    """One measurement's figures: printed as text, written as Markdown and JSON."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        self.rows.append(list(cells))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def _cells(self) -> list[list[str]]:
        return [[fmt(c) for c in row] for row in self.rows]

    def text(self) -> str:
        cells = self._cells()
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(self.columns)]
        line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
        out = [f"== {self.title}", line(self.columns), line(["-" * w for w in widths])]
        out += [line(r) for r in cells]
        out += [f"   note: {n}" for n in self.notes]
        return "\n".join(out)

    def markdown(self) -> str:
        out = [
            f"#### {self.title}",
            "",
            "| " + " | ".join(self.columns) + " |",
            "|" + "|".join("---" for _ in self.columns) + "|",
        ]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in self._cells()]
        if self.notes:
            out.append("")
            out += [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "columns": self.columns, "rows": self.rows, "notes": self.notes}


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("MET" if ok else "NOT MET")


def percentile(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(p / 100 * (len(ordered) - 1)))))
    return ordered[k]


# -- the machine ----------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    def run(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": run(["nproc"]),
        "cpu": cpu,
        "memory": " ".join(run(["free", "-h"]).splitlines()[1].split()[:2]) if shutil.which("free") else "?",
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


# -- processes ------------------------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int | None:
    """VmRSS of ``pid`` in KiB, None when it is gone."""
    return _status_field(pid, "VmRSS:")


def threads(pid: int) -> int | None:
    """Threads of ``pid``, None when it is gone."""
    return _status_field(pid, "Threads:")


def _status_field(pid: int, name: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (its threads included), None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


def local_ports(pid: int) -> set[int]:
    """Local TCP ports of the sockets ``pid`` holds."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = fd.readlink().as_posix()
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU of ``pid`` and of its live descendants (a prefork pool's children)."""
    own = cpu_seconds(pid)
    return None if own is None else own + sum(cpu_seconds(p) or 0.0 for p in all_descendants(pid))


class Sampler:
    """Samples VmRSS and threads of some processes in a thread: ``peak`` (KiB) and ``peak_threads``
    per pid; with ``tree`` each pid's figures include its descendants (summed)."""

    def __init__(self, pids: Iterable[int], every: float = 0.05, tree: bool = False):
        self.pids = list(pids)
        self.every, self.tree = every, tree
        self.peak: dict[int, int] = {}
        self.peak_threads: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sum(self, pid: int, read: Callable[[int], int | None]) -> int | None:
        value = read(pid)
        if value is None or not self.tree:
            return value
        return value + sum(read(p) or 0 for p in all_descendants(pid))

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self.pids:
                for peaks, read in ((self.peak, rss_kib), (self.peak_threads, threads)):
                    value = self._sum(pid, read)
                    if value is not None and value > peaks.get(pid, 0):
                        peaks[pid] = value
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """A child in a session of its own (so a SIGKILL can take its whole group), output to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(ROOT),
            start_new_session=True,
        )


def stop(proc: subprocess.Popen | None, timeout: float = 15.0) -> None:
    """SIGTERM to the child's group, SIGKILL after ``timeout``; always reaped."""
    if proc is None:
        return
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    kill(proc)


def kill(proc: subprocess.Popen | None) -> None:
    """SIGKILL to the child's group and to every descendant (a crash of the worker and of any child
    it forked, even one in a session of its own, as RQ's work horse is)."""
    if proc is None:
        return
    descendants = all_descendants(proc.pid)
    _signal_group(proc, signal.SIGKILL)
    for pid in descendants:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def all_descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in child_pids(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the group this child leads (start_new_session)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def child_pids(pid: int) -> list[int]:
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(p) for p in (task / "children").read_text().split()]
    except (OSError, ValueError):
        pass
    return children


def wait_for(cond: Callable[[], Any], timeout: float, every: float = 0.005, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- the environment of one run -------------------------------------------------------------------


class Env:
    """One redis-server and (if installed) one MariaDB for the whole run, and a scratch directory."""

    def __init__(self, quick: bool, workdir: Path | None = None, options: dict[str, Any] | None = None):
        from tests.servers import RedisServer, ServerNotInstalled

        self.quick = quick
        self.options = options or {}  # the command line's section options (e.g. --llm-latency)
        self.skipped: list[str] = []
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="docllm-bench-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.redis = BenchRedisServer(self.dir / "redis")
        self.mariadb: Any = None
        try:
            self.mariadb = BenchMariaDBServer(self.dir / "mariadb")
        except ServerNotInstalled as exc:
            self.skip(f"MariaDB runs: {exc}")
        self._dbs = 0
        self._RedisServer = RedisServer

    def skip(self, what: str) -> None:
        self.skipped.append(what)
        print(f"SKIPPED: {what}", flush=True)

    def __enter__(self) -> Env:
        self.redis.start()
        if self.mariadb is not None:
            self.mariadb.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.mariadb is not None:
            self.mariadb.close()
        self.redis.close()

    def redis_url(self, db: int = 0) -> str:
        return f"redis://{self.redis.host}:{self.redis.port}/{db}"

    def client(self, db: int = 0, **kwargs: Any):
        import redis

        return redis.Redis(host=self.redis.host, port=self.redis.port, db=db, **kwargs)

    def flush(self, db: int | None = None) -> None:
        with self.client() as c:
            if db is None:
                c.flushall()
            else:
                c.execute_command("SELECT", db)
                c.flushdb()

    def new_database(self, backend: str) -> str:
        """A fresh, empty docllm database: a SQLite file or a MariaDB database. Returns its URL."""
        self._dbs += 1
        if backend == "sqlite":
            path = self.dir / f"sqlite-{self._dbs}" / "docllm.db"
            path.parent.mkdir(parents=True, exist_ok=True)
            return f"sqlite:///{path}"
        assert self.mariadb is not None
        return self.mariadb.create_database(f"bench{self._dbs}")

    def pid_of(self, server: str) -> int | None:
        return self.redis.pid if server == "redis" else (self.mariadb.pid if self.mariadb else None)


def _bench_redis_server_class():
    from tests.servers import RedisServer

    class _BenchRedisServer(RedisServer):
        """The test helper's redis-server with production-like persistence for a benchmark:
        AOF with fsync every second (the embedded default), not fsync on every write."""

        def _argv(self) -> list[str]:
            argv = super()._argv()
            i = argv.index("--appendfsync")
            argv[i + 1] = "everysec"
            return argv

    return _BenchRedisServer


def BenchRedisServer(directory: Path):  # noqa: N802 - a class built lazily
    return _bench_redis_server_class()(directory)


MARIADB_MAX_CONNECTIONS = 2100


def BenchMariaDBServer(directory: Path):  # noqa: N802 - a class built lazily
    """The test helper's MariaDB with room for a connection per slot at DOCLLM_CONCURRENCY=1024
    (and Celery's result backend beside it): the helper's 500 would make the LLM-bound table at
    C = 1024 a measurement of max_connections."""
    from tests.servers import MariaDBServer

    class _BenchMariaDBServer(MariaDBServer):
        def _argv(self) -> list[str]:
            return [a for a in super()._argv() if not a.startswith("--max-connections=")] + [
                f"--max-connections={MARIADB_MAX_CONNECTIONS}"
            ]

    return _BenchMariaDBServer(directory)


REDIS_CONFIG = "redis-server 7 on 127.0.0.1 (TCP), appendonly yes, appendfsync everysec, no RDB"
MARIADB_CONFIG = f"MariaDB (tests/servers), innodb-flush-log-at-trx-commit=2, max-connections={MARIADB_MAX_CONNECTIONS}"


def payload(task_id: int, name: str = "bench") -> str:
    return json.dumps({"task_id": task_id, "task_name": name})


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCLLM_", "PROCESSING_TIMEOUT"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env
