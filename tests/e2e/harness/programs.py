"""docllm processes and CLI commands against one pair of servers and one queue prefix."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.harness.clock_skew import skewed
from tests.e2e.harness.env import ROOT, docllm_argv
from tests.e2e.harness.logs import events, read_log_lines
from tests.e2e.harness.process import Proc
from tests.e2e.harness.waiting import wait_until


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
    def cli(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        raw = subprocess.run(  # noqa: S603
            [*docllm_argv(), *args],
            env={**self.env, **(env or {})},
            cwd=str(ROOT),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        # Bytes that are not UTF-8 survive as surrogate escapes; a test that cares checks for them.
        result = subprocess.CompletedProcess(
            raw.args,
            raw.returncode,
            raw.stdout.decode("utf-8", "surrogateescape"),
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
    def spawn(
        self, name: str, argv: list[str], kind: str, env: Mapping[str, str] | None = None, skew: str | None = None
    ) -> Proc:
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
        return read_log_lines(self.logs)

    def events(self, *names: str) -> list[dict[str, Any]]:
        return events(self.log_lines(), *names)

    def logged(self, name: str, task_ids: Iterable[int], timeout: float) -> list[dict[str, Any]]:
        """The ``name`` events of ``task_ids``, once each has one: a row the test reads as done may
        be a moment (or, after a lost reply, a read timeout) ahead of the line its worker logs."""
        wanted = set(task_ids)

        def found() -> list[dict[str, Any]] | None:
            lines = [e for e in self.events(name) if e.get("task_id") in wanted]
            return lines if {e["task_id"] for e in lines} == wanted else None

        return wait_until(found, timeout, f"a {name} event for each of tasks {sorted(wanted)}", 0.2, self.dump)

    def dump(self) -> str:
        """The end of every process's log, for a failure message."""
        return "\n".join(
            f"--- {p.name} (pid {p.pid}, rc {p.returncode}) ---\n{p.tail(15)}" for p in self.procs.values()
        )
