"""Imported at start-up (as ``sitecustomize``) only by processes the e2e tests run under libfaketime.

libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 (so that timeouts and ``threading`` waits keep
real time) makes CPython's ``time.sleep`` fail with EINVAL: CPython sleeps with
``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` and libfaketime's wrapper mangles that deadline.
Without the option, ``threading`` waits hang for the size of the offset instead. So these processes
sleep with ``select()``, which takes a relative timeout libfaketime leaves alone. Nothing else
changes: the wall clock stays skewed and the monotonic clock real, as on a host whose clock is off.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


time.sleep = _sleep  # type: ignore[assignment]  # replaced on purpose; callers pass seconds
