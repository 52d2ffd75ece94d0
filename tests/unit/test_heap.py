"""The worker process sets the garbage collector for a long run (``runtime/heap.py``): the service
run as the program's main freezes what start-up made and raises the collection thresholds. Checked
in a child process, so this test process's collector is left as it is. The child leaves as ``docllm
worker`` does (``os._exit`` after the stop, no interpreter finalization: on a loaded CI host that
outlasted the exit watchdog once, exit status 1 after a clean stop)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from docllm.runtime import heap

ROOT = Path(__file__).resolve().parents[2]

# A service on the unit tests' rig, built as the program's main would run it; each child adds its part.
SERVICE = textwrap.dedent(
    """
    from docllm.entrypoints.worker import _leave as leave
    from docllm.runtime.service import Parts, Service
    from docllm.settings import Settings
    from tests.support.runtime_rig import FakeReviewer, Rig

    def service():
        rig = Rig(FakeReviewer(0.0), lease=1.0, concurrency=2, threads=True)
        parts = Parts(queue=rig.queue, processor=rig.proc, reviewer=rig.reviewer, breaker=rig.breaker)
        return Service(Settings(lease_seconds=1.0, concurrency=2, worker_id="w"), parts)
    """
)

SERVICE_MAIN = SERVICE + textwrap.dedent(
    """
    import gc, threading

    before = gc.get_threshold()
    main = service()

    def stop():
        main.started.wait(30)
        print("running", gc.get_threshold()[0], gc.get_freeze_count(), flush=True)
        main.request_stop()

    threading.Thread(target=stop, daemon=True).start()
    print("before", before[0], gc.get_freeze_count(), flush=True)
    main.run_forever()
    leave(0)
    """
)


def _child(script: str, **kw: object) -> subprocess.Popen[str]:
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, text=True, **kw)  # type: ignore[call-overload]


def test_the_program_main_freezes_start_up_and_raises_the_young_threshold():
    child = _child(SERVICE_MAIN, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr[-2000:]
    seen = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in stdout.splitlines()}
    assert seen["before"] == [700, 0]  # the interpreter's defaults until the service runs
    threshold, frozen = seen["running"]
    assert threshold == heap.THRESHOLDS[0]
    assert frozen > 10_000, "start-up's objects are in the permanent generation"


SLOW_SETTLE = SERVICE + textwrap.dedent(
    """
    import logging, sys, time
    from docllm.runtime import heap

    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    heap.settle = lambda: time.sleep(2.0)  # a collection that takes long
    service().run_forever()
    leave(0)
    """
)


def test_a_sigterm_once_the_main_says_starting_is_a_stop_even_while_the_heap_settles():
    """The "starting" line is what a supervisor waits for before it may SIGTERM (the chaos harness):
    the handlers exist by then, and the collection happens under them (a chaos run saw two workers
    killed, exit -15, by a SIGTERM during it)."""
    child = _child(SLOW_SETTLE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said: list[str] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            said.append(line)
            if line.startswith("starting: "):
                break
        child.send_signal(signal.SIGTERM)
        said.extend(child.stdout)
        assert child.wait(30) == 0, "".join(said)[-3000:]
    finally:
        child.kill()
