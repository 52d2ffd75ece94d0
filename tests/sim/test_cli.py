"""The command line: JSON, replay of one seed with its trace, the timeline plot, usage errors."""

from __future__ import annotations

import json

import pytest

from sim.crash_scenarios import main


def test_json_has_one_row_per_scenario_and_design(capsys):
    assert main(["--design", "both", "--scenario", "d7", "--seeds", "2", "--json", "--jobs", "1"]) == 1
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["scenario"], r["design"]): r for r in doc["rows"]}
    assert set(rows) == {("d7", "product"), ("d7", "original")}
    assert rows[("d7", "product")]["violations"] == {}
    assert "I7" in rows[("d7", "original")]["violations"]
    assert all(v["design"] == "original" for v in doc["violations"])
    assert doc["shortest_traces"][0]["replay"].startswith("python -m sim.crash_scenarios")


def test_a_replayed_seed_prints_its_full_trace(capsys):
    assert main(["--scenario", "d1", "--seed", "4", "--trace"]) == 0
    out = capsys.readouterr().out
    assert "trace of product / d1 / seed 4" in out
    assert ("queue.claim" in out or "queue.lease_staged" in out) and "faults stop" in out


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "timeline.png"
    assert main(["--scenario", "d9", "--seed", "0", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as exc:
        main(["--seeds", "0"])
    assert exc.value.code == 2
    assert main(["--design", "original", "--break", "unfenced-commit"]) == 2


def test_markdown_table(capsys):
    assert main(["--scenario", "d1", "--seeds", "1", "--markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| scenario | design | runs |") and out[2].startswith("| d1 | product | 1 |")
