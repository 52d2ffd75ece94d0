"""``SignalWake``: the supervisor's wait, woken by a signal without a lock in its handler (an
``Event.set`` in a handler can wait forever for the lock its own thread holds)."""

from __future__ import annotations

import os
import signal
import time

from docllm.entrypoints.signal_wake import SignalWake


def test_a_signal_wakes_the_wait_and_no_signal_lets_it_time_out() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda sig, _frame: seen.append(sig))  # no lock, no wake call
    wake = SignalWake().open()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)  # before the wait: its byte is already in the pipe
        started = time.monotonic()
        wake.wait(30.0)
        assert time.monotonic() - started < 10.0 and seen == [signal.SIGUSR1]
        started = time.monotonic()
        wake.wait(0.05)  # the byte was read: nothing wakes this one
        assert time.monotonic() - started >= 0.04
    finally:
        wake.close()
        signal.signal(signal.SIGUSR1, previous)
    assert signal.set_wakeup_fd(-1) == -1  # closed: the previous wake-up fd (none) is back
