"""The arithmetic of lane and tenant figures (domain/lanes/figures.py): buckets, quantiles, tallies."""

from __future__ import annotations

import pytest

from docllm.domain.lanes.figures import (
    LANES,
    WAIT_BUCKETS,
    GroupFigures,
    Kind,
    Tally,
    checked_top,
    lane_of,
    wait_bucket,
)


def figures(**waits: int) -> GroupFigures:
    """Waits given as {bound_index: count}, e.g. figures(b0=19, b8=1)."""
    counts = [0] * (len(WAIT_BUCKETS) + 1)
    for key, n in waits.items():
        counts[int(key[1:])] = n
    return GroupFigures("x", waits=tuple(counts))


def test_a_wait_falls_in_the_first_bucket_whose_bound_holds_it():
    assert wait_bucket(0) == 0 and wait_bucket(0.1) == 0 and wait_bucket(0.11) == 1
    assert WAIT_BUCKETS[wait_bucket(45)] == 60
    assert wait_bucket(10**9) == len(WAIT_BUCKETS)  # beyond the last bound


def test_quantiles_are_the_bound_of_their_bucket():
    g = figures(b0=19, b8=1)
    assert (g.wait_quantile(0.5), g.wait_quantile(0.95), g.wait_quantile(1.0)) == (0.1, 0.1, 60)
    assert figures(b0=18, b8=2).wait_quantile(0.95) == 60  # 19th of 20 is a slow one
    assert figures(b17=3).wait_quantile(0.5) == WAIT_BUCKETS[-1]  # "at least" the last bound
    assert GroupFigures("x").wait_quantile(0.95) is None


def test_a_tally_adds_groups_and_lists_every_lane_first():
    tally = Tally()
    tally.add("bulk", Kind.pending, None, 3, oldest_s=20.0)
    tally.add("bulk", Kind.pending, None, 1, oldest_s=50.0)
    tally.add("bulk", Kind.processing, 2, 2)
    tally.add("bulk", Kind.finished, 2, 5)
    tally.add("zz-unknown", Kind.pending, None, 1, oldest_s=1.0)
    lanes = tally.lanes()
    assert [g.name for g in lanes] == [*LANES, "zz-unknown"]
    bulk = lanes[LANES.index("bulk")]
    assert (bulk.depth, bulk.in_flight, bulk.finished, bulk.wait_samples, bulk.oldest_pending_s) == (4, 2, 5, 7, 50.0)


def test_tenants_rank_by_depth_then_in_flight_then_name():
    tally = Tally()
    for name, kind, n in (
        ("b", Kind.pending, 2),
        ("a", Kind.pending, 2),
        (None, Kind.pending, 2),
        ("c", Kind.processing, 9),
    ):
        tally.add(name, kind, None, n)
    tally.add("a", Kind.processing, None, 1)
    assert [g.name for g in tally.ranked(["c", "b", None, "a"])] == ["a", None, "b", "c"]


def test_lanes_and_the_bound_on_top_tenants():
    assert lane_of(None) == "default" and lane_of("bulk") == "bulk"
    assert checked_top(0) == 0 and checked_top(100) == 100
    with pytest.raises(ValueError, match="between 0 and 100"):
        checked_top(101)
