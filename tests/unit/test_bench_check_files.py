"""``python -m bench.check_files --quick`` still runs: 50 files through the real ``docllm check`` (no
figure checked; the figures are in docs/BENCHMARKS.md)."""

from __future__ import annotations

from bench import check_files


def test_the_check_files_bench_runs(tmp_path):
    figures = check_files.main(["--quick", "--json", str(tmp_path / "out.json")])
    assert figures["files"] == 50 and figures["findings"] > 0 and (tmp_path / "out.json").exists()
