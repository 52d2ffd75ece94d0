"""A wake-up a signal handler may give: no lock taken in the handler.

A Python signal handler runs in the main thread between two bytecodes, possibly while that thread
is inside ``threading.Event.wait`` holding the event's lock; the handler's ``Event.set`` then waits
for that same lock forever. That hung ``docllm worker --processes`` when its two children exited
together (two SIGCHLDs, the parent never woke). Here the handler only marks, and the C-level
handler writes the signal's byte to a pipe (``signal.set_wakeup_fd``) that ``wait`` selects on.
"""

from __future__ import annotations

import os
import select
import signal


class SignalWake:
    """Install with ``open()`` in the main thread; ``wait(timeout)`` returns early once a signal
    with a Python handler arrived; ``close()`` restores the previous wake-up fd."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._previous: int | None = None

    def open(self) -> SignalWake:
        self._previous = signal.set_wakeup_fd(self._w)
        return self

    def wait(self, timeout: float) -> None:
        select.select([self._r], [], [], max(0.0, timeout))
        try:
            while os.read(self._r, 512):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self._previous is not None:
            signal.set_wakeup_fd(self._previous)
            self._previous = None
        os.close(self._r)
        os.close(self._w)
