"""The same seed gives the same run, event for event, whatever the process's hash seed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from sim.runner import Options, run_once

ROOT = Path(__file__).resolve().parents[2]
DIGEST = """
import hashlib
from sim.runner import Options, run_once
h = hashlib.sha256()
for design in ("product", "original"):
    h.update(repr(run_once("random", design, 11, Options(keep_trace=True)).trace).encode())
print(h.hexdigest())
"""


def test_same_seed_same_trace():
    for name in ("storm", "d10", "random"):
        a = run_once(name, "product", 3, Options(keep_trace=True, keep_timeline=True))
        b = run_once(name, "product", 3, Options(keep_trace=True, keep_timeline=True))
        assert a.trace == b.trace and a.timeline == b.timeline
        assert len(a.trace) > 50


def test_another_seed_another_run():
    a = run_once("random", "product", 1, Options(keep_trace=True))
    b = run_once("random", "product", 2, Options(keep_trace=True))
    assert a.trace != b.trace


def test_the_trace_does_not_depend_on_the_hash_seed():
    digests = set()
    for hash_seed in ("1", "2"):
        # this checkout's src first: the installed docllm may be another checkout's
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
        out = subprocess.run(
            [sys.executable, "-c", DIGEST], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    local = hashlib.sha256()
    for design in ("product", "original"):
        local.update(repr(run_once("random", design, 11, Options(keep_trace=True)).trace).encode())
    assert digests == {local.hexdigest()}
