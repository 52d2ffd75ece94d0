"""Every named crash point fires in the scenarios that arm it.

The points are armed on port-call names ("repo.start_attempt", "repo.commit"); since issue 31 the
worker's starts and end-of-attempt writes reach the store as ``write_group`` calls, and a point
armed on a name no call has any more never fires: the runs stay green and test less. The
simulation names a group by what it holds (``sim.fault_injection.call_name``)."""

from __future__ import annotations

import pytest

from sim.runner import Options, run_once

SEEDS = range(5)
POINTS = [
    ("d2", "worker:before_start", ("crash before repo.start_attempt",)),
    ("d9", "worker:after_llm", ("crash before repo.commit", "crash before repo.retry", "crash before repo.fail")),
    ("storm", "worker:after_commit", ("crash after repo.commit",)),
    ("d1", "worker:after_claim", ("crash after queue.claim_batch", "crash after queue.lease_staged")),
]


@pytest.mark.parametrize(("scenario", "point", "marks"), POINTS, ids=[p[1] for p in POINTS])
def test_the_point_fires_and_the_runs_stay_clean(scenario, point, marks):
    fired = 0
    for seed in SEEDS:
        result = run_once(scenario, "product", seed, Options(keep_trace=True))
        assert not result.violations, [(v.invariant, v.message) for v in result.violations]
        fired += sum(1 for line in result.trace if any(m in str(line) for m in marks))
    assert fired, f"{point} never fired in {scenario} seeds {list(SEEDS)}"
