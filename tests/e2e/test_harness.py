"""The harness itself: a skewed process really runs hours off, with a working sleep and real
monotonic time (otherwise the chaos test's clock skew would prove nothing, or break everything)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.e2e.harness import ROOT, cpu_seconds, find_libfaketime, skewed

pytestmark = pytest.mark.e2e

PROGRAM = """
import json, threading, time
m0, t0 = time.monotonic(), time.time()
time.sleep(0.2)
threading.Event().wait(0.2)
print(json.dumps({"wall": t0, "slept": time.monotonic() - m0}))
"""


@pytest.mark.skipif(find_libfaketime() is None, reason="libfaketime is not installed (scripts/test installs it)")
@pytest.mark.parametrize("offset, hours", [("+8h", 8), ("-7h", -7)])
def test_skewed_process_has_a_wall_clock_hours_off_and_real_timeouts(offset: str, hours: int) -> None:
    env = {"PATH": "/usr/bin:/bin", **skewed(offset, str(ROOT))}
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=20, check=True
    ).stdout
    seen = json.loads(out)
    assert abs(seen["wall"] - before - hours * 3600) < 60
    assert 0.35 < seen["slept"] < 2.0


def test_cpu_seconds_counts_a_busy_child() -> None:
    burn = "import sys, time\nwhile time.process_time() < 1.0: pass\nprint('done', flush=True)\ntime.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        assert 0.9 <= cpu_seconds(proc.pid) < 5.0
    finally:
        proc.kill()
        proc.wait()
