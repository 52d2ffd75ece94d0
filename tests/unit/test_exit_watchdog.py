"""A stopped process exits even when something holds it (here a thread the interpreter would join
for ever), with every thread's stack in its log to say what held it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import logging, threading
    from docllm.runtime import exit_watchdog

    logging.basicConfig()
    threading.Thread(target=threading.Event().wait, name="stuck-on-a-socket").start()  # never ends
    exit_watchdog.arm(0.3)
    """
)


def test_a_process_held_after_its_stop_exits_with_its_stacks_in_the_log():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert "the process had not exited 0.3s after it stopped" in done.stderr
    assert "Thread 0x" in done.stderr and "in wait" in done.stderr  # the stuck thread's stack


def test_when_the_first_stage_cannot_run_faulthandler_exits_the_process():
    # As if the watchdog thread never got to run (a thread holding the GIL in C code).
    program = PROGRAM.replace(
        "exit_watchdog.arm(0.3)", "threading.Timer.start = lambda self: None\nexit_watchdog.arm(0.3)"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert "Timeout (0:00:01.300000)!" in done.stderr and "in wait" in done.stderr
