"""``docllm demo`` on embedded defaults: every task succeeds and the killed task's recovery shows."""

import os
import subprocess
import sys


def test_demo_recovers_the_killed_task_and_finishes_every_task(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCLLM_")}
    env["DOCLLM_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "docllm.entrypoints.cli", "demo"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "SIGKILL demo-worker-" in out and "reaper reclaimed task" in out
    assert "committed once by attempt 2" in out and "every task succeeded" in out
    assert out.count("success") >= 5
    assert "dashboard" in out  # where to see the reports next
