"""The benchmarks still run: ``python -m bench --quick`` end to end on tiny N (no figures checked),
the LLM-bound table (mock LLM at 0.2 s, C = 4) and the idle Redis tables included.

It needs a redis-server (as the integration tests do); MariaDB, the peers (``.[bench]``) and
py-spy are optional and reported as SKIPPED by the run itself. No timing is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import find_redis_server

ROOT = Path(__file__).resolve().parents[2]


def run_bench(tmp_path: Path, *argv: str, timeout: float) -> dict:
    """``python -m bench ARGV --json ... --workdir ...``: its results, after it exited 0."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", *argv, "--json", str(out), "--workdir", str(tmp_path / "w")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.long(75)
def test_quick_benchmark_runs_every_measurement(tmp_path: Path) -> None:
    if not find_redis_server():
        pytest.skip("redis-server not installed: run scripts/test to install it")
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--json",
            str(out),
            "--markdown",
            str(md),
            "--workdir",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert results["failed"] == []
    keys = {t["key"] for t in results["tables"]}
    assert {
        "floor",
        "queue_only",
        "worker",
        "memory",
        "reaper",
        "recovery",
        "llm_mock",
        "llm",
        "idle_redis",
        "wake",
    } <= keys
    llm = results["llm"]
    assert llm["mock_check"]["ratio"] > 0.5  # the mock answers (the >= 0.98 goal is for the full run)
    docllm = [r for r in llm["runs"] if r["name"] == "docllm"]
    assert docllm and not docllm[0]["problems"], docllm
    for table in results["tables"]:
        assert table["rows"], table["key"]
    # whatever was left out says why, in the output and in the results
    for skipped in results["skipped"]:
        assert f"SKIPPED: {skipped}" in proc.stdout
    assert md.read_text().count("| ") > 10


def test_table_formats_and_percentiles() -> None:
    from bench.common import Table, percentile, verdict

    t = Table("k", "title", ["a", "b"])
    t.add(1, 2.5)
    t.add("x", None)
    assert "| 1 | 2.50 |" in t.markdown()
    assert "title" in t.text()
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([], 99) is None
    assert verdict(True) == "MET" and verdict(False) == "NOT MET" and verdict(None) == "n/a"


@pytest.mark.timeout(120)
def test_the_reviewer_cpu_bench_runs_every_variant() -> None:
    """``python -m bench.reviewer_cpu --quick`` (issue 24): every variant reviews against the mock LLM."""
    from bench.reviewer_cpu import VARIANTS

    proc = subprocess.run(
        [sys.executable, "-m", "bench.reviewer_cpu", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 8 | ")]
    assert [row.split(" | ")[1] for row in rows] == list(VARIANTS)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_hotpath_command_has_a_row_per_worker_and_a_ratio(tmp_path: Path) -> None:
    """``python -m bench hotpath --quick`` (issue 24's one command): a row per worker, a ratio to docllm."""
    if not find_redis_server():
        pytest.skip("redis-server not installed: run scripts/test to install it")
    results = run_bench(tmp_path, "hotpath", "--quick", timeout=110)
    (table,) = [t for t in results["tables"] if t["key"] == "hotpath"]
    ratio = table["columns"].index("/ docllm same repeat")
    workers = [row[3] for row in table["rows"]]
    peers = ("celery", "dramatiq", "dramatiq-durable", "arq")
    assert workers[0].startswith("mock alone") and workers[1].startswith("docllm"), workers
    assert len(workers) == 2 + len([p for p in peers if not any(f"hotpath {p}:" in s for s in results["skipped"])]), (
        workers
    )
    assert table["rows"][1][ratio] == "1"
    assert all(row[ratio] not in (None, "", "-") for row in table["rows"][1:]), table["rows"]
    assert table["rows"][0][table["columns"].index("/ mock alone same repeat")] == "1"
    runs = results["hotpath"]["runs"]
    assert runs and all(not r["problems"] for r in runs), runs


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose environment holds ``text`` (the fleet's workers carry their scratch dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_capacity_command_measures_each_fleet_size_and_leaves_no_process(tmp_path: Path) -> None:
    """``python -m bench capacity --quick`` (issue 29): P = 1 and 3 worker processes, idle and busy
    figures for each, every task done once, and no worker left running afterwards."""
    from tests.servers import find_mariadbd

    if not (find_redis_server() and find_mariadbd()):
        pytest.skip("redis-server or mariadbd not installed: run scripts/test to install them")
    out, work = tmp_path / "capacity.json", tmp_path / "w"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "capacity", "--quick", "--json", str(out), "--workdir", str(work)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    leftovers = _processes_mentioning(str(work))
    assert not leftovers, f"processes left running: {leftovers}"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert {t["key"] for t in results["tables"]} == {"capacity", "capacity_fleet"}
    steps = results["capacity"]["steps"]
    assert [s["processes"] for s in steps] == [1, 3]
    done = 0
    for s in steps:
        idle, busy = s["idle"], s["busy"]
        assert not busy["problems"], busy["problems"]
        done += busy["n"]
        assert busy["rows"] == {"counts": {"success": done}, "max_attempt": 1}
        # every process holds Redis and MariaDB connections and polls Redis a little when idle
        assert idle["redis_clients"] >= 1 and idle["mariadb_connections"] >= 1, idle
        assert 0 < idle["redis_commands_per_s"] < 1000, idle
        assert idle["rss_mib"] > 10 and 0 < idle["pss_mib"] <= idle["rss_mib"], idle
        assert busy["per_s"] > 0 and busy["com_commit"] > 0 and busy["questions"] > 0, busy
        assert busy["redis_commands"] > 0 and busy["redo_bytes"] > 0, busy


@pytest.mark.e2e
@pytest.mark.timeout(150)
def test_the_hotpath_command_runs_the_durable_fair_peer_at_two_processes(tmp_path: Path) -> None:
    """``--peers dramatiq-durable --processes 1 2`` (issue 24): the equal-durability fair peer's rows,
    at one and two processes, each with every row success at the end (its two writes made)."""
    from tests.servers import find_mariadbd

    if not find_redis_server() or not find_mariadbd():
        pytest.skip("redis-server or mariadbd not installed: run scripts/test to install them")
    if importlib.util.find_spec("dramatiq") is None:
        pytest.skip("dramatiq not installed (pip install -e '.[bench]')")
    argv = ["hotpath", "--quick", "--processes", "1", "2", "--peers", "dramatiq-durable"]
    results = run_bench(tmp_path, *argv, timeout=140)
    runs = results["hotpath"]["runs"]
    assert sorted((r["name"], r["processes"]) for r in runs) == [
        ("docllm", 1),
        ("docllm", 2),
        ("dramatiq-durable", 1),
        ("dramatiq-durable", 2),
        ("mock", 0),
    ], runs
    # a run whose rows are not all success says so (named, so a red run shows which and why)
    assert [(r["name"], r["processes"], r["problems"]) for r in runs if r["problems"]] == []
    durable = [r for r in runs if r["name"] == "dramatiq-durable"]
    assert all("two MariaDB writes" in r["label"] and "pools of" in r["label"] for r in durable), durable


def test_the_fair_peer_splits_its_connections_as_docllms_reviewer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``BENCH_LLM_SPLIT=1``: the peer's openai connections in pools of at most POOL_CONNECTIONS."""
    from bench.llm_task import _pool_sizes
    from docllm.adapters.llm.openai_reviewer import POOL_CONNECTIONS

    monkeypatch.setenv("BENCH_LLM_CONCURRENCY", "1024")
    monkeypatch.delenv("BENCH_LLM_SPLIT", raising=False)
    assert _pool_sizes() == [1024]
    monkeypatch.setenv("BENCH_LLM_SPLIT", "1")
    assert _pool_sizes() == [POOL_CONNECTIONS] * (1024 // POOL_CONNECTIONS)
    monkeypatch.setenv("BENCH_LLM_CONCURRENCY", "100")
    assert _pool_sizes() == [25] * 4 and max(_pool_sizes()) <= POOL_CONNECTIONS


def test_timeline_rounds_are_the_kth_c_arrivals_and_their_lag() -> None:
    from bench.timeline import rounds

    arrivals = [100.0, 100.1, 101.5, 101.3, 102.9, 102.6]  # two per round, out of order; L = 1 s
    got = rounds(arrivals, 2, 1.0)
    assert [(round(r["first"], 6), round(r["last"], 6)) for r in got] == [(0.0, 0.1), (1.3, 1.5), (2.6, 2.9)]
    assert [round(r["lag"], 6) for r in got] == [0.05, 0.4, 0.75]
    assert rounds([], 2, 1.0) == []


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.long(40)
def test_the_timeline_command_reads_every_request_of_every_round(tmp_path: Path) -> None:
    """``python -m bench timeline --quick`` (C = 16, L = 0.2 s, N = 4C): four rounds of C arrivals."""
    if not find_redis_server():
        pytest.skip("redis-server not installed: run scripts/test to install it")
    (run,) = run_bench(tmp_path, "timeline", "--quick", timeout=240)["timeline"]
    assert run["c"] == 16 and run["per_s"], run
    assert len(run["rounds"]) == 4 and run["rounds"][0]["first"] == 0.0, run
    assert all(r["first"] <= r["median"] <= r["last"] for r in run["rounds"]), run
    assert all(later["first"] >= 0.2 * k for k, later in enumerate(run["rounds"])), run  # an answer comes after L


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_hotpath_ab_command_runs_two_trees_in_turn() -> None:
    """``python -m bench.hotpath_ab`` (issue 24's same-run A/B of a patch): one pair, both trees."""
    if not find_redis_server():
        pytest.skip("redis-server not installed: run scripts/test to install it")
    argv = ["src", "--base", "src", "--pairs", "1", "--c", "4", "--latency", "0.2", "--rounds", "2"]
    proc = subprocess.run(
        [sys.executable, "-m", "bench.hotpath_ab", *argv], cwd=ROOT, capture_output=True, text=True, timeout=110
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert [
        line.split(" | ")[0]
        for line in proc.stdout.splitlines()
        if line.startswith("| base") or line.startswith("| other")
    ] == ["| base", "| other"]
    assert "other / base: tasks/s" in proc.stdout
