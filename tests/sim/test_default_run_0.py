"""Share 1 of 4 of the default run of ``python -m sim.crash_scenarios`` (tests/sim/default_run.py)."""

from __future__ import annotations

import pytest

from tests.sim.default_run import check_share


@pytest.mark.timeout(1200)  # about 40 s alone on 2 cores; beside the other test processes, several times that
@pytest.mark.long(120)
def test_share_of_the_default_run_has_no_violation() -> None:
    print(check_share(0))
