"""Issue 48: ``docllm check`` over 1,000 Markdown files with the offline reviewer.

    PYTHONPATH=src:. python -m bench.check_files                 # 1,000 files, 3 runs
    PYTHONPATH=src:. python -m bench.check_files --files 5000 --runs 1
    PYTHONPATH=src:. python -m bench.check_files --quick         # 50 files, 1 run (the smoke run)

The files are the Markdown documents of examples/docs and examples/eval, copied round-robin with
their headings numbered (so no two files are the same), in 10 folders: a docs tree of the size a
large repository has. Each run is the real command in a new process (``python -m docllm.entrypoints.cli
check DIR --format json --output ...``), start-up and imports included, timed by the wall clock; the
start-up alone is the same command on one file. Per-file cost = (the run - the start-up) / files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "examples" / "docs").glob("*.md")) + sorted((ROOT / "examples" / "eval").glob("*.md"))


def write_tree(root: Path, files: int) -> int:
    """``files`` Markdown files under ``root``; their total size in bytes."""
    texts = [p.read_text() for p in SOURCES]
    size = 0
    for i in range(files):
        folder = root / f"section-{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        text = texts[i % len(texts)].replace("# ", f"# {i} ", 1)
        (folder / f"doc-{i:05d}.md").write_text(text)
        size += len(text.encode())
    return size


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="docllm check over many Markdown files, offline reviewer")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", default="json")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="write the figures there too")
    args = parser.parse_args(argv)
    files, runs = (50, 1) if args.quick else (args.files, args.runs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCLLM_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "docs"
        size = write_tree(tree, files)
        cli = [sys.executable, "-m", "docllm.entrypoints.cli", "check"]
        out = ["--format", args.format, "--output", str(Path(tmp) / "out"), "--fail-on", "critical"]
        one = next(tree.rglob("*.md"))
        startup = [timed([*cli, str(one), *out], env)[0] for _ in range(runs)]
        totals, findings = [], 0
        for _ in range(runs):
            seconds, done = timed([*cli, str(tree), *out], env)
            if done.returncode not in (0, 1):
                raise SystemExit(f"docllm check exited {done.returncode}: {done.stderr.strip()}")
            totals.append(seconds)
            if args.format == "json":
                report = json.loads((Path(tmp) / "out").read_text())
                findings = sum(len(d["findings"]) for d in report["documents"])
    total, start = statistics.median(totals), statistics.median(startup)
    figures = {
        "files": files,
        "bytes": size,
        "runs": runs,
        "format": args.format,
        "seconds": round(total, 2),
        "startup_seconds": round(start, 2),
        "ms_per_file": round((total - start) / files * 1000, 2),
        "findings": findings,
        "all_seconds": [round(t, 2) for t in totals],
    }
    print(
        f"docllm check, {files} Markdown files ({size / 1e6:.1f} MB), offline reviewer, --format {args.format}: "
        f"{figures['seconds']} s (median of {runs}; start-up {figures['startup_seconds']} s), "
        f"{figures['ms_per_file']} ms per file, {findings} findings"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return figures


if __name__ == "__main__":
    main()
