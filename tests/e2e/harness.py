"""Real docllm processes for the end-to-end and chaos tests, run as an operator runs them.

- :func:`product_env`: the environment every docllm process gets (servers, queue prefix, short
  lease and intervals, JSON logs), without anything inherited from the caller's ``DOCLLM_*``.
- :class:`Proc`: one program (worker, reaper, LLM test server) with its own log file; SIGKILL,
  SIGTERM, restart. Optionally under libfaketime, its wall clock hours off (:func:`skewed`).
- :class:`Harness`: starts workers (``python -m docllm.entrypoints.worker``) and reapers
  (``docllm reaper``), runs CLI commands as subprocesses and parses their JSON, reads every
  process's JSON log lines back as events.
- :class:`Probe`: read-only looks at Redis and the database, straight from the test process.
- :func:`wait_until`: a deadline and a message instead of ``sleep``.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis
import sqlalchemy as sa

from docllm.adapters.redis_keys import RedisKeys

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

# Short enough that a crash is recovered in seconds, long enough for a loaded 2-core machine.
FAST_SETTINGS = {
    "DOCLLM_LEASE_SECONDS": "3",
    "DOCLLM_REAPER_INTERVAL_SECONDS": "0.5",
    "DOCLLM_RECONCILE_INTERVAL_SECONDS": "1",
    "DOCLLM_RECONCILE_GRACE_SECONDS": "3",
    "DOCLLM_RETRY_BASE_SECONDS": "0.2",
    "DOCLLM_RETRY_MAX_SECONDS": "2",
    "DOCLLM_SHUTDOWN_GRACE_SECONDS": "2",
    "DOCLLM_MAX_ATTEMPTS": "5",
    "DOCLLM_CONCURRENCY": "2",
    "DOCLLM_LLM_PROVIDER": "offline",
    "DOCLLM_LLM_TIMEOUT_SECONDS": "10",
    "DOCLLM_LOG_FORMAT": "json",
    "DOCLLM_LOG_LEVEL": "INFO",
}


def product_env(redis_url: str, database_url: str, prefix: str, home: Path, **settings: str) -> dict[str, str]:
    """The caller's environment minus its docllm settings, plus the servers and FAST_SETTINGS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCLLM_", "FAKETIME")) and k != "OPENAI_API_KEY"}
    env.pop("LD_PRELOAD", None)
    env.update(FAST_SETTINGS)
    env.update(
        DOCLLM_REDIS_URL=redis_url,
        DOCLLM_DATABASE_URL=database_url,
        DOCLLM_QUEUE_PREFIX=prefix,
        DOCLLM_HOME=str(home),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    )
    env.update(settings)
    return env


def docllm_argv() -> list[str]:
    """The ``docllm`` console script of this Python's environment, else ``python -m`` (never another
    environment's ``docllm`` found on PATH)."""
    script = Path(sys.executable).with_name("docllm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "docllm.entrypoints.cli"]


# -- clock skew -----------------------------------------------------------------------------------

_LIBFAKETIME = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)


def find_libfaketime() -> str | None:
    found = [p for p in _LIBFAKETIME if os.path.exists(p)]
    found += glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
    return found[0] if found else None


SHIM = Path(__file__).resolve().parent / "faketime_shim"


def skewed(offset: str, pythonpath: str = "") -> dict[str, str]:
    """Environment that runs a process with its wall clock moved by ``offset`` (``"+8h"``, ``"-6h"``).

    libfaketime preloaded directly (not the ``faketime`` wrapper, which would stand between us
    and the PID we signal). Only CLOCK_REALTIME (time.time, datetime.now) moves:
    FAKETIME_DONT_FAKE_MONOTONIC=1 leaves CLOCK_MONOTONIC alone, so timeouts, heartbeats and
    ``threading`` waits in the skewed process run at the real pace, and the test shows the product
    ignores the wall clock instead of showing that a broken monotonic clock breaks everything.
    That option breaks CPython's ``time.sleep`` in libfaketime 0.9.10 (EINVAL), which
    ``faketime_shim/sitecustomize.py``, put first on ``PYTHONPATH`` (after ``pythonpath``'s
    entries are kept), works around.
    """
    lib = find_libfaketime()
    if lib is None:
        raise RuntimeError("libfaketime is not installed (apt-get install faketime; scripts/test does it)")
    return {"LD_PRELOAD": lib, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SHIM), pythonpath]))}


# -- processes ------------------------------------------------------------------------------------


def _pdeathsig() -> Callable[[], None] | None:
    """Children die with the test process (SIGKILL from the kernel), even if it is SIGKILLed."""
    from tests.servers.procs import _make_preexec

    return _make_preexec(os.getpid())


@dataclass
class Proc:
    """One program with its log file (appended to across restarts)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    kind: str = "process"
    popen: subprocess.Popen[bytes] | None = None
    incarnation: int = 0
    started_at: float = 0.0  # monotonic
    worker_id: str = ""  # DOCLLM_WORKER_ID of the current incarnation
    log_offset: int = 0  # where the current incarnation's log lines begin

    def start(self) -> Proc:
        if self.alive:
            return self
        self.incarnation += 1
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        env = dict(self.env)
        if self.kind in ("worker", "reaper"):
            self.worker_id = env.setdefault("DOCLLM_WORKER_ID", f"{self.name}.{self.incarnation}")
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(  # noqa: S603 - argv built by the tests
                self.argv, env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_pdeathsig(),
            )
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def kill(self) -> None:
        """SIGKILL and reap: a crash at whatever moment the process is in."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
        if self.popen is not None:
            self.popen.wait()

    def terminate(self) -> None:
        """SIGTERM, without waiting."""
        if self.alive:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None when it is still running after ``timeout`` seconds."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = 15.0) -> int | None:
        self.terminate()
        code = self.wait(timeout)
        if code is None:
            self.kill()
        return code

    def current_log(self) -> str:
        """What the current incarnation has logged so far."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def serving(self) -> bool:
        """A docllm program that has installed its signal handlers and started its loops."""
        return self.alive and '"message": "starting: ' in self.current_log()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30, width: int = 400) -> str:
        return "\n".join(line[:width] for line in self.log_text().splitlines()[-lines:])


# -- the harness ----------------------------------------------------------------------------------


class CommandFailed(AssertionError):
    pass


@dataclass
class Harness:
    """docllm processes and CLI commands against one pair of servers and one queue prefix."""

    workdir: Path
    env: dict[str, str]
    procs: dict[str, Proc] = field(default_factory=dict)

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    @property
    def prefix(self) -> str:
        return self.env["DOCLLM_QUEUE_PREFIX"]

    # -- CLI ----------------------------------------------------------------------------------
    def cli(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        raw = subprocess.run(  # noqa: S603
            [*docllm_argv(), *args], env={**self.env, **(env or {})}, cwd=str(ROOT),
            capture_output=True, timeout=timeout, check=False,
        )
        # Bytes that are not UTF-8 survive as surrogate escapes; a test that cares checks for them.
        result = subprocess.CompletedProcess(
            raw.args, raw.returncode, raw.stdout.decode("utf-8", "surrogateescape"),
            raw.stderr.decode("utf-8", "surrogateescape"),
        )
        if check and result.returncode != 0:
            raise CommandFailed(
                f"docllm {' '.join(args)} exited {result.returncode}\nstdout: {result.stdout[-2000:]}\n"
                f"stderr: {result.stderr[-2000:]}"
            )
        return result

    def cli_json(self, *args: str, **kwargs: Any) -> Any:
        result = self.cli(*args, "--json", **kwargs)
        try:
            return json.loads(result.stdout)
        except ValueError as exc:
            raise CommandFailed(f"docllm {' '.join(args)} --json printed no JSON: {result.stdout[:500]!r}") from exc

    def init_db(self) -> None:
        self.cli("init-db")

    def submit(self, paths: Iterable[Path | str], env: Mapping[str, str] | None = None) -> list[dict]:
        return self.cli_json("submit", *map(str, paths), env=env)

    def status(self, *task_ids: int) -> list[dict]:
        return self.cli_json("status", *map(str, task_ids))

    def stats(self) -> dict:
        return self.cli_json("stats")

    # -- processes ----------------------------------------------------------------------------
    def spawn(self, name: str, argv: list[str], kind: str, env: Mapping[str, str] | None = None,
              skew: str | None = None) -> Proc:
        if name in self.procs and self.procs[name].alive:
            raise ValueError(f"{name} is already running")
        full_env = {**self.env, **(env or {})}
        if skew:
            full_env.update(skewed(skew, full_env.get("PYTHONPATH", "")))
        proc = Proc(name, argv, full_env, self.logs / f"{name}.log", kind)
        self.procs[name] = proc
        return proc.start()

    def worker(self, name: str, env: Mapping[str, str] | None = None, skew: str | None = None) -> Proc:
        return self.spawn(name, [sys.executable, "-m", "docllm.entrypoints.worker"], "worker", env, skew)

    def reaper(self, name: str, env: Mapping[str, str] | None = None, skew: str | None = None) -> Proc:
        return self.spawn(name, [*docllm_argv(), "reaper"], "reaper", env, skew)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            if proc.wait(5.0) is None:
                proc.kill()

    # -- logs ---------------------------------------------------------------------------------
    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON log line of every process, each with ``_proc`` (the process name)."""
        lines: list[dict[str, Any]] = []
        for path in sorted(self.logs.glob("*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by SIGKILL
                record["_proc"] = path.stem
                lines.append(record)
        return lines

    def events(self, *names: str) -> list[dict[str, Any]]:
        return [r for r in self.log_lines() if "event" in r and (not names or r["event"] in names)]

    def dump(self) -> str:
        """The end of every process's log, for a failure message."""
        return "\n".join(f"--- {p.name} (pid {p.pid}, rc {p.returncode}) ---\n{p.tail(15)}" for p in self.procs.values())


# -- read-only probes -----------------------------------------------------------------------------


class Probe:
    """Looks at Redis and the database directly (no CLI start-up cost), for waits and checks."""

    def __init__(self, redis_url: str, database_url: str, prefix: str):
        self.keys = RedisKeys(prefix)
        self.redis = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2)
        self.engine = sa.create_engine(database_url, pool_pre_ping=True, pool_size=2,
                                       connect_args={"connect_timeout": 5, "read_timeout": 30})

    def close(self) -> None:
        self.redis.close()
        self.engine.dispose()

    def leases(self) -> list[dict[str, Any]]:
        """Every lease: token, holder, task_id, claimed_at (ms, Redis clock)."""
        out = []
        for token, data in self.redis.hgetall(self.keys.leases).items():
            lease = json.loads(data.decode("utf-8", "surrogateescape"))  # a payload may not be UTF-8
            lease["token"] = token.decode()
            out.append(lease)
        return out

    def redis_now_ms(self) -> int:
        seconds, micros = self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def queue_sizes(self) -> dict[str, int]:
        k, r = self.keys, self.redis
        return {
            "ready": r.llen(k.ready), "processing": r.llen(k.processing), "delayed": r.zcard(k.delayed),
            "dead": r.llen(k.dead), "leases": r.hlen(k.leases), "lease_index": r.zcard(k.lease_index),
            "processing_ts": r.hlen(k.processing_ts),
        }

    def dead_letters(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.redis.lrange(self.keys.dead, 0, -1):
            entry = json.loads(raw.decode("utf-8", "surrogateescape"))
            out.append(entry)
        return out

    def rows(self, with_result: bool = True) -> dict[int, dict[str, Any]]:
        cols = "task_id, task_name, status, attempt, retry_count, lease_token, error" + (", result" if with_result else "")
        with self.engine.connect() as conn:
            found = conn.execute(sa.text(f"SELECT {cols} FROM task_doc_llm")).mappings().all()  # noqa: S608
        rows = {}
        for row in found:
            row = dict(row)
            if with_result and row.get("result") is not None:
                row["result"] = json.loads(row["result"])
            rows[int(row["task_id"])] = row
        return rows

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            found = conn.execute(sa.text("SELECT status, COUNT(*) FROM task_doc_llm GROUP BY status")).all()
        return {"pending": 0, "processing": 0, "success": 0, "failed": 0} | {s: int(n) for s, n in found}

    def execute(self, sql: str, **params: Any) -> int:
        with self.engine.begin() as conn:
            return conn.execute(sa.text(sql), params).rowcount


# -- fencing audit ----------------------------------------------------------------------------------

AUDIT_TABLE = "e2e_commit_audit"


def install_commit_audit(probe: Probe) -> None:
    """A trigger that writes down every UPDATE that leaves a row ``success``.

    The product's commit is the only write that may do that (once per task, from the attempt that
    holds the fencing token), so the audit counts commits independently of the product's own logs.
    """
    with probe.engine.begin() as conn:
        conn.execute(sa.text(
            f"CREATE TABLE IF NOT EXISTS {AUDIT_TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
            "task_id BIGINT NOT NULL, attempt INT NOT NULL, lease_token VARCHAR(64), "
            "at DATETIME(6) NOT NULL)"
        ))
        conn.execute(sa.text("DROP TRIGGER IF EXISTS e2e_commit_audit_trg"))
        conn.execute(sa.text(
            "CREATE TRIGGER e2e_commit_audit_trg AFTER UPDATE ON task_doc_llm FOR EACH ROW "
            f"BEGIN IF NEW.status = 'success' THEN INSERT INTO {AUDIT_TABLE} (task_id, attempt, lease_token, at) "
            "VALUES (NEW.task_id, NEW.attempt, NEW.lease_token, NOW(6)); END IF; END"
        ))


def commits(probe: Probe) -> dict[int, list[int]]:
    """task_id -> the attempt numbers of its commits, in order."""
    with probe.engine.connect() as conn:
        found = conn.execute(sa.text(f"SELECT task_id, attempt FROM {AUDIT_TABLE} ORDER BY id")).all()  # noqa: S608
    out: dict[int, list[int]] = {}
    for task_id, attempt in found:
        out.setdefault(int(task_id), []).append(int(attempt))
    return out


# -- documents ------------------------------------------------------------------------------------


def write_documents(directory: Path, count: int, tag: str = "doc", start: int = 1) -> dict[str, str]:
    """``count`` small Markdown files; returns file name -> its first heading line (what the LLM
    test server quotes, so a stored report can be matched to its document)."""
    directory.mkdir(parents=True, exist_ok=True)
    headings = {}
    for i in range(start, start + count):
        name = f"{tag}-{i:05d}.md"
        heading = f"# {tag.capitalize()} {i}: checking report {i * 7919 % 100003}"
        body = (f"{heading}\n\nThis document number {i} explains one thing.\n\n## Details\n\n"
                f"Step {i} is described here. It has a [link](https://example.com/{i}).\n")
        (directory / name).write_text(body, encoding="utf-8")
        headings[name] = heading
    return headings


def report_matches(result: Any, heading: str) -> bool:
    """The stored report is about this document: a finding quotes its first heading."""
    if not isinstance(result, dict):
        return False
    return any(f.get("quote") == heading for f in result.get("findings") or [])


# -- waiting and measuring --------------------------------------------------------------------------


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.1,
               on_timeout: Callable[[], str] | None = None) -> T:
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


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may contain spaces
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def start_llm_server(harness: Harness, name: str = "llm", latency_ms: str = "0-0", rate_429: float = 0.0,
                     rate_500: float = 0.0, seed: int = 1, port: int = 0) -> tuple[Proc, int]:
    """``python -m tests.support.llm_server`` as a process; returns it and its port."""
    argv = [sys.executable, "-m", "tests.support.llm_server", "--port", str(port), "--latency-ms", latency_ms,
            "--rate-429", str(rate_429), "--rate-500", str(rate_500), "--seed", str(seed)]
    proc = harness.spawn(name, argv, "llm")

    def port_printed() -> int | None:
        text = proc.log_text().strip().splitlines()
        return int(text[0]) if text and text[0].isdigit() else None

    return proc, wait_until(port_printed, 20, f"the LLM test server {name} to print its port",
                            on_timeout=proc.tail)
