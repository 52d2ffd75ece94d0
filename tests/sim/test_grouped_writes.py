"""The simulation runs grouped starts (issue 31): a worker's claimed batch starts as one store
group (``TaskProcessor.begin_batch``), and the ``groups`` scenario has workers die before such a
group, after the claim, and lose a group's reply after it landed, on skewed clocks. Every
invariant holds, and the runs really contain what they are meant to test."""

from __future__ import annotations

import re

from sim.runner import Options, run_once

SEEDS = range(5)
GROUP = re.compile(r"write_group of 0 writes and ([2-9]|\d{2,}) starts")
LOST = re.compile(r"repo\.write_group \(0 writes, ([2-9]|\d{2,}) starts\) landed; its reply is lost")


def test_grouped_starts_with_crashes_and_lost_replies_keep_every_invariant():
    seen = {"groups": 0, "lost": 0, "crash before a start": 0}
    for seed in SEEDS:
        result = run_once("groups", "product", seed, Options(keep_trace=True))
        assert not result.violations, (seed, [(v.invariant, v.message) for v in result.violations])
        lines = [str(line) for line in result.trace]
        seen["groups"] += sum(1 for line in lines if GROUP.search(line))
        seen["lost"] += sum(1 for line in lines if LOST.search(line))
        seen["crash before a start"] += sum(1 for line in lines if "crash before repo.start_attempt" in line)
    assert all(seen.values()), seen
