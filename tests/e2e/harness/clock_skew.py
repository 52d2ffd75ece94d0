"""A process with its wall clock hours off (libfaketime), its monotonic clock untouched."""

from __future__ import annotations

import glob
import os
from pathlib import Path

_LIBFAKETIME = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)


def find_libfaketime() -> str | None:
    found = [p for p in _LIBFAKETIME if os.path.exists(p)]
    found += glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
    return found[0] if found else None


def require_libfaketime() -> None:
    """Fail under CI (the chaos runs must run there), skip elsewhere, when libfaketime is missing."""
    import pytest

    if find_libfaketime() is None:
        message = "libfaketime is not installed (scripts/test installs the faketime package)"
        if os.environ.get("CI", "").lower() in {"true", "1", "yes"}:
            pytest.fail(message)
        pytest.skip(message)


SHIM = Path(__file__).resolve().parents[1] / "faketime_shim"


def skewed(offset: str, pythonpath: str = "") -> dict[str, str]:
    """Environment that runs a process with its wall clock moved by ``offset`` (``"+8h"``, ``"-6h"``).

    libfaketime preloaded directly (not the ``faketime`` wrapper, which would stand between us
    and the PID we signal). Only CLOCK_REALTIME (time.time, datetime.now) moves:
    FAKETIME_DONT_FAKE_MONOTONIC=1 leaves CLOCK_MONOTONIC alone, so timeouts, heartbeats and
    ``threading`` waits in the skewed process run at the real pace, and the test shows the product
    ignores the wall clock instead of showing that a broken monotonic clock breaks everything.
    That option breaks CPython's ``time.sleep`` in libfaketime 0.9.10 (EINVAL), which
    ``faketime_shim/sitecustomize.py``, put first on ``PYTHONPATH`` (after ``pythonpath``'s
    entries are kept), works around.
    """
    lib = find_libfaketime()
    if lib is None:
        raise RuntimeError("libfaketime is not installed (apt-get install faketime; scripts/test does it)")
    return {
        "LD_PRELOAD": lib,
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SHIM), pythonpath])),
    }
