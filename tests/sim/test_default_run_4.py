"""Share 5 of 8 of the default run of ``python -m sim.crash_scenarios`` (tests/sim/default_run.py)."""

from __future__ import annotations

import pytest

from tests.sim.default_run import check_share


@pytest.mark.timeout(1800)  # about 20 s alone on 2 cores; 15 min seen beside 20 busy processes
@pytest.mark.long(60)
def test_share_of_the_default_run_has_no_violation() -> None:
    print(check_share(4))
