"""Every parser the offline checks run on a document has a bound on depth, size and time (issue 48):
a hostile block is a finding and the review goes on."""

from __future__ import annotations

import pytest

from docllm.adapters.offline.checks import bounds
from docllm.adapters.offline.checks.markdown import parse
from docllm.adapters.offline.reviewer import OfflineReviewer
from tests.support.hostile import FENCE, HOSTILE, NEEDLE


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_block_is_a_finding_and_the_rest_is_reviewed(name):
    doc = HOSTILE[name] + "\nThe end. TODO finish.\n"
    findings = OfflineReviewer().review_now("t", doc)["findings"]
    [deep] = [f for f in findings if NEEDLE in f["message"]]
    assert deep["category"] == "code" and deep["location"]["line_start"] == 5
    assert any("TODO marker" in f["message"] for f in findings)  # the review went on


def test_a_block_over_the_size_bound_is_not_parsed(monkeypatch):
    monkeypatch.setattr("docllm.adapters.offline.checks.code_blocks.MAX_BLOCK_BYTES", 100)
    doc = f"# A\n\n{FENCE}json\n[{'1, ' * 50}1\n{FENCE}\n"
    [f] = OfflineReviewer().review_now("t", doc)["findings"]
    assert "too large to check" in f["message"]


def test_the_markdown_parse_stops_at_its_time_bound():
    parsed = parse("[" * 100_000 + "x\n", seconds=0.05)  # quadratic in markdown-it: minutes unbounded
    assert "too complex to check" in parsed.unreadable and parsed.headings == []


def test_an_unreadable_document_is_one_finding(monkeypatch):
    monkeypatch.setattr("docllm.adapters.offline.checks.document.parse", lambda text: parse(text, seconds=0.05))
    [f] = OfflineReviewer().review_now("t", "# A\n\n" + "[" * 20_000 + "x\n")["findings"]
    assert "was not checked" in f["message"] and f["severity"] == "medium"


def test_code_blocks_stop_once_the_reviews_time_is_spent(monkeypatch):
    monkeypatch.setattr("docllm.adapters.offline.checks.document.REVIEW_SECONDS", -1.0)  # spent at once
    doc = f"# A\n\n{FENCE}json\n{{}}\n{FENCE}\n\n{FENCE}json\n{{}}\n{FENCE}\n"
    [f] = OfflineReviewer().review_now("t", doc)["findings"]
    assert "were not parsed" in f["message"] and f["location"]["line_start"] == 3


@pytest.mark.parametrize(
    "text, depth",
    [('[[1], {"a": [2]}]', 3), ('"[[[[" [1]', 1), ("(" * 300, bounds.MAX_DEPTH + 1), ("'[[[' [ ]", 1)],
)
def test_nesting_depth_counts_brackets_outside_strings(text, depth):
    assert bounds.nesting_depth(text, quotes="\"'") == depth


def test_a_yaml_block_stops_at_its_time_bound(monkeypatch):
    monkeypatch.setattr("docllm.adapters.offline.checks.code_blocks.YAML_SECONDS", 0.0)  # spent at once
    doc = f"# A\n\n{FENCE}yaml\nitems: [{', '.join(['x'] * 2000)}]\n{FENCE}\n"
    [f] = OfflineReviewer().review_now("t", doc)["findings"]
    assert "YAML block is too slow to parse (over 0 s)" in f["message"]


def test_an_apostrophe_in_a_yaml_word_does_not_hide_a_deep_flow():
    doc = f"# A\n\n{FENCE}yaml\na: don't\nb: {'[' * 5000}{']' * 5000}\n{FENCE}\n"
    [f] = OfflineReviewer().review_now("t", doc)["findings"]
    assert "nested over 200 levels deep" in f["message"]


def test_a_large_document_is_reviewed_off_the_event_loop(monkeypatch):
    """Up to its parsers' bounds a large document may take seconds, which the worker's heartbeats on
    the loop cannot wait: it is reviewed in a thread; a small one on the loop (milliseconds)."""
    import asyncio
    import threading

    from docllm.adapters.offline import reviewer as module

    threads = []
    real = module.OfflineReviewer.review_now

    def spy(self, *args):
        threads.append(threading.get_ident())
        return real(self, *args)

    monkeypatch.setattr(module.OfflineReviewer, "review_now", spy)

    async def both() -> int:
        await module.OfflineReviewer().review("small", "# A\n\nText.\n")
        await module.OfflineReviewer().review("large", "# A\n\n" + "Text. " * (module.THREAD_ABOVE_CHARS // 5))
        return threading.get_ident()

    loop_thread = asyncio.run(both())
    assert threads[0] == loop_thread and threads[1] != loop_thread


@pytest.mark.timeout(120)  # a bound, not a speed figure: it takes about 2 s, and took minutes when quadratic
def test_a_paragraph_of_thousands_of_markers_is_reviewed_in_linear_time():
    doc = "# A\n\n" + "TODO x [a](#nope) more\n" * 3000
    findings = OfflineReviewer().review_now("t", doc)["findings"]
    assert sum("TODO marker" in f["message"] for f in findings) == 3000
