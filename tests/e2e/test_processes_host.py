"""``docllm worker --processes`` and its host, on real processes: ``auto`` in a cgroup limited to
1 CPU starts 1 worker; the metrics directory stays at the live children's files plus one folded
file however many children die; children stop when their parent is SIGKILLed, and a parent started
after it finds none of them still working."""

from __future__ import annotations

import glob
import itertools
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from docllm.adapters.telemetry.metrics_folding import FoldedMetrics
from docllm.runtime.supervisor import Supervisor
from tests.e2e.harness import Harness, docllm_argv, wait_until

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")  # a zombie is gone too
    except FileNotFoundError:
        return True


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


# -- 50 child deaths: the folder stays the size of the live children plus one folded file -------
# A child writes what a worker writes (docllm's own Metrics: counters, a histogram, live gauges),
# says so on stdout, then waits to be killed or to exit.
CHILD = """
import os, sys, time
from docllm.adapters.telemetry.metrics import Metrics
m = Metrics()
m.claimed.inc()
m.attempt_seconds.labels("succeeded").observe(0.3)
m.spend_today.set(1.0)
print("written", flush=True)
if sys.argv[1] == "exit":
    sys.exit(3)
time.sleep(120)
"""
DEATHS = 50


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_fifty_child_deaths_leave_the_live_childrens_files_and_one_folded_file(tmp_path: Path) -> None:
    folded = FoldedMetrics(str(tmp_path))
    registry = CollectorRegistry()
    registry.register(folded)
    env = _env(PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    ways = itertools.cycle(["sigkill", "exit", "sigterm"])
    children: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(slot: int, worker_id: str) -> subprocess.Popen[bytes]:
        way = next(ways) if len(children) < DEATHS else "live"  # the last ones stay
        child = subprocess.Popen(  # noqa: S603 - this test's program
            [sys.executable, "-c", CHILD, way], env=env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        assert child.stdout is not None and child.stdout.readline() == b"written\n"
        children[child.pid] = child
        if way == "sigkill":
            child.kill()
        elif way == "sigterm":
            child.terminate()
        return child

    clock = itertools.count(0.0, 1000.0)  # every step is past every backoff: replaced at once
    supervisor = Supervisor(2, "h", spawn, lambda: float(next(clock)), 30.0, on_exit=folded.fold)
    supervisor.start()
    try:
        while sum(len(slot.exits) for slot in supervisor.slots) < DEATHS:
            for slot in supervisor.slots:
                if slot.child is not None:
                    children[slot.child.pid].wait(30)  # dead before the next look, so every step folds what died
            supervisor.step()
        supervisor.step()  # the last two replaced (a death's replacement starts at a later step)
        live = {slot.child.pid for slot in supervisor.slots if slot.child is not None and slot.child.poll() is None}
        deaths = sum(len(slot.exits) for slot in supervisor.slots)
        files = {os.path.basename(f) for f in glob.glob(str(tmp_path / "*.db"))}
        owned = {f for f in files if f[: -len(".db")].rsplit("_", 1)[-1] in {str(pid) for pid in live}}
        assert files - owned == {"folded.db"}, sorted(files - owned)  # the live children's, plus one
        assert deaths == DEATHS and len(live) == 2 and len(children) == deaths + len(live)
        # Nothing counted is lost: every child's counter and histogram, dead or alive, summed once.
        samples = _samples(registry)
        everyone = float(len(children))
        assert samples[("docllm_tasks_claimed_total", ())] == everyone
        assert samples[("docllm_attempt_duration_seconds_count", (("outcome", "succeeded"),))] == everyone
        assert samples[("docllm_attempt_duration_seconds_sum", (("outcome", "succeeded"),))] == pytest.approx(
            0.3 * everyone
        )
        # The live gauges show the live children only.
        assert samples[("docllm_spend_usd_today", ())] == 1.0
    finally:
        for child in children.values():
            child.kill()
            child.wait(10)


# -- parent death: each guard alone stops an orphan ------------------------------------------------
# A middle process starts a grandchild with one guard, prints its pid and sleeps; the test SIGKILLs
# the middle one and waits for the grandchild to go.
MIDDLE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(child.pid, flush=True)
time.sleep(120)
"""
GUARDED = """
import os, signal, sys, time
from docllm.adapters.host import parent_death
if sys.argv[1] == "signal":
    assert parent_death.parent_death_signal(signal.SIGTERM)
elif sys.argv[1] == "watch":
    import threading
    threading.Thread(target=parent_death._watch, args=(os.getppid(), signal.SIGTERM, 0.2), daemon=True).start()
print("armed", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("guard", ["signal", "watch"])
def test_each_guard_alone_stops_the_child_of_a_sigkilled_parent(guard: str) -> None:
    if guard == "signal" and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    middle = subprocess.Popen(  # noqa: S603 - this test's program
        [sys.executable, "-c", MIDDLE, GUARDED, guard], env=_env(), stdout=subprocess.PIPE
    )
    try:
        assert middle.stdout is not None
        grandchild = int(middle.stdout.readline())
        assert middle.stdout.readline() == b"armed\n"  # the grandchild's guard is set (the same pipe)
        assert not _gone(grandchild)
        middle.kill()
        middle.wait(10)
        wait_until(lambda: _gone(grandchild), 5.0, f"the orphan (guard: {guard}) to stop")
    finally:
        middle.kill()
        try:
            os.kill(grandchild, signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError):
            pass


# -- the real program -------------------------------------------------------------------------------
def _supervised(parent: int | None = None) -> dict[int, int]:
    """pid -> parent pid of every `docllm worker --supervised` process on the host (of ``parent``)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"--supervised" in argv and b"worker" in argv and not _gone(int(entry.name)):
            found[int(entry.name)] = ppid
    return {pid: ppid for pid, ppid in found.items() if parent is None or ppid == parent}


def _started(harness: Harness, name: str) -> dict[str, int]:
    return {
        r["worker"]: r["pid"]
        for r in harness.log_lines()
        if r["_proc"] == name and r.get("logger") == "docllm.supervisor" and "started (pid" in r["message"]
    }


def test_a_sigkilled_parents_children_stop_and_the_next_parent_finds_no_orphan(harness: Harness) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    env = {"DOCLLM_WORKER_ID": "first", "DOCLLM_CONCURRENCY": "1"}
    first = harness.spawn("first", [*docllm_argv(), "worker", "--processes", "2"], "worker", env)
    wait_until(lambda: len(_started(harness, "first")) == 2, 60, "two children", on_timeout=harness.dump)
    children = list(_started(harness, "first").values())
    assert set(_supervised(first.pid)) == set(children)
    first.kill()  # SIGKILL: no forwarding, no cleanup in the parent
    # An idle child drains at once: its stop takes the loops' end and the registry's leave.
    wait_until(lambda: all(_gone(pid) for pid in children), 10.0, "the orphans to stop", on_timeout=harness.dump)
    second = harness.spawn(
        "second", [*docllm_argv(), "worker", "--processes", "2"], "worker", {**env, "DOCLLM_WORKER_ID": "second"}
    )
    wait_until(lambda: len(_started(harness, "second")) == 2, 60, "the second fleet", on_timeout=harness.dump)
    assert set(_supervised()) >= set(_started(harness, "second").values())
    assert not set(_supervised()) & set(children)
    second.terminate()
    assert second.wait(60) == 0


# -- a cgroup limited to 1 CPU --------------------------------------------------------------------
def _one_cpu_cgroup() -> Path | None:
    """A new cgroup limited to 1 CPU (v2 where its cpu controller is on, else v1), or None."""
    name = f"docllm-test-{uuid.uuid4().hex[:8]}"
    v2 = Path("/sys/fs/cgroup")
    try:
        if "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
            (v2 / name).mkdir()
            (v2 / name / "cpu.max").write_text("100000 100000\n")
            return v2 / name
    except OSError:
        pass
    v1 = next((Path(p) for p in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct") if os.path.isdir(p)), None)
    try:
        if v1 is not None:
            (v1 / name).mkdir()
            (v1 / name / "cpu.cfs_period_us").write_text("100000\n")
            (v1 / name / "cpu.cfs_quota_us").write_text("100000\n")
            return v1 / name
    except OSError:
        pass
    return None


def test_auto_in_a_cgroup_limited_to_one_cpu_starts_one_worker(harness: Harness) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the affinity mask alone gives 1 here: the test would prove nothing")
    cgroup = _one_cpu_cgroup()
    if cgroup is None:
        pytest.skip("no writable cgroup with the cpu controller (run as root on Linux)")
    procs = str(cgroup / "cgroup.procs")
    try:
        argv = ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *docllm_argv(), "worker"]
        env = {"DOCLLM_WORKER_ID": "capped"}
        refused = subprocess.run(  # noqa: S603 - the test's own argv
            [*argv, "--processes", "5"], env=harness.env, capture_output=True, text=True, timeout=60
        )
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "--processes 5 is more than 4 per usable CPU (1 usable CPUs" in refused.stderr

        auto = harness.spawn("auto", [*argv, "--processes", "auto"], "worker", env)
        found = wait_until(
            lambda: [r for r in harness.log_lines() if r["_proc"] == "auto" and "--processes auto" in r["message"]],
            60,
            "the start-up line",
            on_timeout=harness.dump,
        )
        assert found[0]["message"].startswith("--processes auto: 1 worker process (1 usable CPUs"), found
        assert f"cgroup CPU quota 1 (/sys/fs/cgroup/{cgroup.relative_to('/sys/fs/cgroup')})" in found[0]["message"]
        # One worker: the process itself (no parent, no child), beating the registry.
        wait_until(lambda: harness.cli_json("workers"), 60, "the worker to register", on_timeout=harness.dump)
        assert [(w["id"], w["pid"]) for w in harness.cli_json("workers")] == [("capped", auto.pid)]
        assert not _started(harness, "auto") and not _supervised(auto.pid)
        auto.terminate()
        assert auto.wait(60) == 0
    finally:
        for pid in (cgroup / "cgroup.procs").read_text().split():
            os.kill(int(pid), signal.SIGKILL)
        wait_until(lambda: not (cgroup / "cgroup.procs").read_text().strip(), 10, "the cgroup to empty")
        cgroup.rmdir()
