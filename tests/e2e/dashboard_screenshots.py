"""``python -m tests.e2e.dashboard_screenshots``: the dashboard's main pages as PNGs in
docs/screenshots/, taken by the browser test (real servers, worker processes, headless Chromium)."""

from __future__ import annotations

import os
import sys

import pytest

from tests.e2e.harness import ROOT


def main() -> int:
    os.environ["DOCLLM_SCREENSHOTS"] = str(ROOT / "docs" / "screenshots")
    return int(pytest.main([str(ROOT / "tests" / "e2e" / "test_dashboard_browser.py"), "-q", "-p", "no:cacheprovider"]))


if __name__ == "__main__":
    sys.exit(main())
