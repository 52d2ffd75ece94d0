"""The ``--processes`` supervisor's decisions, on a manual clock with children that are records:
replace the dead with backoff, forward a stop, kill past the deadline, health."""

from __future__ import annotations

import argparse
import signal
from dataclasses import dataclass, field

import pytest

from docllm.entrypoints.processes import parse_processes
from docllm.runtime.supervisor import STABLE_SECONDS, Supervisor, child_stop_seconds, describe_exit
from docllm.settings import Settings

STOP = 10.0


@dataclass
class FakeChild:
    """A child process as the supervisor sees it: it exits when a test says so, or on SIGKILL."""

    pid: int
    worker_id: str
    code: int | None = None
    signals: list[int] = field(default_factory=list)
    stops_on_signal: bool = True

    def poll(self) -> int | None:
        return self.code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)

    def kill(self) -> None:
        self.signals.append(signal.SIGKILL)
        self.code = -signal.SIGKILL

    def exit(self, code: int) -> None:
        self.code = code


class Host:
    """The clock and the process table the supervisor is given."""

    def __init__(self) -> None:
        self.now = 100.0
        self.children: list[FakeChild] = []
        self.dead: list[int] = []

    def spawn(self, slot: int, worker_id: str) -> FakeChild:
        child = FakeChild(1000 + len(self.children), worker_id)
        self.children.append(child)
        return child

    def supervisor(self, n: int = 2) -> Supervisor:
        sup = Supervisor(n, "host:7", self.spawn, lambda: self.now, STOP, on_exit=self.dead.append)
        sup.start()
        return sup

    def live(self) -> list[str]:
        return [c.worker_id for c in self.children if c.code is None]


def test_each_child_gets_its_own_worker_id_and_a_replacement_a_new_one() -> None:
    host = Host()
    sup = host.supervisor(3)
    assert host.live() == ["host:7-1", "host:7-2", "host:7-3"]
    host.children[1].exit(-signal.SIGKILL)
    sup.step()
    host.now += 1.0
    sup.step()
    assert host.live() == ["host:7-1", "host:7-3", "host:7-2.1"]


def test_a_dead_child_is_replaced_after_a_backoff_that_grows_while_it_keeps_dying() -> None:
    host = Host()
    sup = host.supervisor(2)
    delays = []
    for _ in range(4):
        host.children[-1].exit(1)
        died = host.now
        assert sup.step() == 0.5  # the next look: a tick (sooner than the respawn)
        count = len(host.children)
        while len(host.children) == count:  # step until the replacement starts
            host.now += 0.25
            sup.step()
        delays.append(host.now - died)
    assert delays == [1.0, 2.0, 4.0, 8.0]  # domain.backoff.Backoff(1, 30)
    assert host.dead == [c.pid for c in host.children if c.code is not None]  # metrics: mark_process_dead
    assert sup.slots[1].exits == ["exit code 1"] * 4


def test_a_child_that_ran_a_good_while_before_it_died_is_replaced_after_the_first_delay() -> None:
    host = Host()
    sup = host.supervisor(1)
    for _ in range(3):  # a crash loop: the backoff grows
        host.children[-1].exit(1)
        sup.step()
        host.now += 60.0
        sup.step()
    host.now += STABLE_SECONDS  # the last one lives a minute
    host.children[-1].exit(-signal.SIGSEGV)
    sup.step()
    assert sup.slots[0].respawn_at - host.now == 1.0


def test_health_names_the_children_being_replaced() -> None:
    host = Host()
    sup = host.supervisor(2)
    assert sup.health() == (True, [])
    host.children[0].exit(-signal.SIGKILL)
    sup.step()
    assert sup.health() == (False, ["host:7-1 is being replaced (killed by SIGKILL)"])
    with pytest.raises(RuntimeError, match="host:7-1 is being replaced"):
        sup.require_all_alive()
    host.now += 1.0
    sup.step()
    assert sup.health() == (True, [])


def test_a_stop_is_forwarded_to_every_child_and_the_dead_are_no_longer_replaced() -> None:
    host = Host()
    sup = host.supervisor(2)
    sup.stop(signal.SIGINT)
    assert [c.signals for c in host.children] == [[signal.SIGINT], [signal.SIGINT]]
    host.children[0].exit(0)
    host.now += 3.0
    sup.step()
    assert not sup.done and len(host.children) == 2  # not replaced
    sup.stop(signal.SIGTERM)  # a second signal: forwarded to the one still running
    assert host.children[1].signals == [signal.SIGINT, signal.SIGTERM]
    host.children[1].exit(0)
    sup.step()
    assert sup.done and sup.killed == [] and sup.health() == (True, [])
    assert host.dead == [1000, 1001]


def test_a_child_still_running_past_the_deadline_is_killed_and_only_that_one() -> None:
    host = Host()
    sup = host.supervisor(2)
    sup.stop()
    host.children[0].exit(0)
    host.now += STOP - 0.1
    assert sup.step() == pytest.approx(0.1)  # wakes at the deadline
    assert signal.SIGKILL not in host.children[1].signals
    host.now += 0.1
    sup.step()
    assert host.children[0].signals == [signal.SIGTERM]
    assert host.children[1].signals == [signal.SIGTERM, signal.SIGKILL]
    sup.step()  # reaped
    assert sup.done and sup.killed == ["host:7-2"]


def test_a_child_dead_before_the_stop_is_not_replaced_during_it() -> None:
    host = Host()
    sup = host.supervisor(2)
    host.children[0].exit(-signal.SIGKILL)
    sup.step()
    sup.stop()
    host.now += 5.0
    host.children[1].exit(0)
    sup.step()
    assert sup.done and len(host.children) == 2


def test_a_child_that_cannot_be_started_is_tried_again_with_backoff() -> None:
    host = Host()
    failures = [OSError("fork: out of memory")]

    def spawn(slot: int, worker_id: str) -> FakeChild:
        if failures:
            raise failures.pop()
        return host.spawn(slot, worker_id)

    sup = Supervisor(1, "h", spawn, lambda: host.now, STOP)
    sup.start()
    assert host.children == []
    assert sup.health() == (False, ["h-1 is being replaced (could not start: fork: out of memory)"])
    host.now += 1.0
    sup.step()
    assert host.live() == ["h-1.1"]


def test_the_kill_deadline_follows_the_settings() -> None:
    # grace + min(lease / 2, 5 s) + leave 1 s + the exit watchdog's 2 s + a 2 s margin
    assert child_stop_seconds(Settings(shutdown_grace_seconds=20, lease_seconds=30)) == 20 + 5 + 1 + 2 + 2
    assert child_stop_seconds(Settings(shutdown_grace_seconds=2, lease_seconds=3)) == 2 + 1.5 + 1 + 2 + 2


def test_exit_statuses_are_described_as_codes_or_signals() -> None:
    assert describe_exit(1) == "exit code 1"
    assert describe_exit(-9) == "killed by SIGKILL"


@pytest.mark.parametrize("text", ["0", "-1", "x", "", "1.5"])
def test_a_bad_number_of_processes_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not a number of processes"):
        parse_processes(text)


def test_auto_is_resolved_at_start_and_numbers_parse() -> None:
    assert parse_processes("auto") == "auto"  # the CPUs are counted at start (test_cpu_budget.py)
    assert parse_processes("3") == 3


# -- the command ---------------------------------------------------------------------------------
def test_the_worker_command_runs_a_parent_only_for_more_than_one_process(monkeypatch, capsys) -> None:
    from docllm.entrypoints import cli, processes, worker

    ran: list[tuple[str, object]] = []

    def run_worker(**kw: object) -> int:
        ran.append(("worker", kw))
        return 0

    def run_parent(settings: Settings, n: int) -> int:
        ran.append(("parent", n))
        return 0

    monkeypatch.setattr(worker, "main", run_worker)
    monkeypatch.setattr(processes, "run", run_parent)
    monkeypatch.setattr("docllm.logs.setup_logging", lambda *a, **kw: None)
    monkeypatch.setenv("DOCLLM_HOME", "/nonexistent-docllm-home")
    assert cli.main(["worker"]) == 0
    assert cli.main(["worker", "--processes", "1"]) == 0
    assert cli.main(["worker", "--supervised"]) == 0
    assert cli.main(["worker", "--processes", "2"]) == 0
    assert ran == [
        ("worker", {"workers": True, "reaper": True, "http": True}),
        ("worker", {"workers": True, "reaper": True, "http": True}),
        ("worker", {"workers": True, "reaper": True, "http": False}),
        ("parent", 2),
    ]
    assert cli.main(["worker", "--processes", "0"]) == 2
    assert "argument --processes: '0' is not a number of processes" in capsys.readouterr().err
    ran.clear()
    assert cli.main(["worker", "--processes", "100000"]) == 2  # above the bound: one line, nothing runs
    err = capsys.readouterr().err
    assert err.startswith("docllm: --processes 100000 is more than") and err.count("\n") == 1
    assert ran == []


def test_a_parent_whose_port_is_taken_starts_no_child_and_leaves_nothing_behind(monkeypatch, tmp_path) -> None:
    import socket

    from docllm.entrypoints import processes

    monkeypatch.setattr("docllm.logs.setup_logging", lambda *a, **kw: None)
    monkeypatch.setattr(processes.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(processes.subprocess, "Popen", lambda *a, **kw: pytest.fail("a child was started"))
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGCHLD)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = Settings(metrics_port=taken.getsockname()[1], metrics_host="127.0.0.1", worker_id="h")
        with pytest.raises(OSError):
            processes.run(settings, 2)
    assert list(tmp_path.iterdir()) == []  # the metrics directory is removed
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGCHLD)) == handlers


def test_a_parent_removes_the_metrics_directories_of_dead_parents_only(tmp_path) -> None:
    import os
    import subprocess
    import sys

    from docllm.entrypoints.processes import METRICS_PREFIX, remove_dead_parents_metrics

    gone = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: S603 - a pid that has ended
    gone.wait()
    dead = tmp_path / f"{METRICS_PREFIX}{gone.pid}-abc"
    alive = tmp_path / f"{METRICS_PREFIX}{os.getppid()}-def"  # a running parent (the old naming)
    other = tmp_path / "docllm-metrics-xyz"  # not ours to judge
    for directory in (dead, alive, other):
        directory.mkdir()
        (directory / "counter_1.db").write_bytes(b"x")
    assert remove_dead_parents_metrics(str(tmp_path)) == [str(dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])


def test_a_restarted_container_removes_what_its_previous_parent_left(tmp_path) -> None:
    """In a container the parent is PID 1 at every start: a directory with a running pid but
    another start time, or with this process's own pid, is a previous run's. (Review of issue 47,
    hole 4.)"""
    import os

    from docllm.entrypoints.processes import METRICS_PREFIX, metrics_directory_prefix, remove_dead_parents_metrics

    assert metrics_directory_prefix().startswith(f"{METRICS_PREFIX}{os.getpid()}-{_start_of(os.getpid())}-")

    mine_before = tmp_path / f"{METRICS_PREFIX}{os.getpid()}-old0run"  # the old naming, our pid
    restarted = tmp_path / f"{METRICS_PREFIX}{os.getppid()}-1-abc"  # a running pid, another start time
    running = tmp_path / f"{METRICS_PREFIX}{os.getppid()}-{_start_of(os.getppid())}-xyz"
    for directory in (mine_before, restarted, running):
        directory.mkdir()
    removed = remove_dead_parents_metrics(str(tmp_path))
    assert sorted(removed) == sorted([str(mine_before), str(restarted)])
    assert [p.name for p in tmp_path.iterdir()] == [running.name]  # its parent still runs


def _start_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1].split()[19]
