"""OfflineReviewer: every check fires on a document that has its problem and stays quiet on one that does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.domain.errors import PermanentError
from docllm.domain.review.report import validate_report

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "docs").glob("*.md"))
FENCE = "```"

# (what the finding's message contains, a document that triggers it, a similar one that does not)
CASES = {
    "marker": (
        "TODO marker",
        "# A\n\nInstall it. TODO: explain proxies.\n",
        "# A\n\nSearch the code for `TODO` comments.\n",
    ),
    "marker in code is not prose": (  # issue 48: a snippet's comment is the snippet's business
        "FIXME marker",
        f"# A\n\nFIXME: say which shell.\n\n{FENCE}python\nx = 1\n{FENCE}\n",
        f"# A\n\n{FENCE}python\nx = 1  # FIXME\n{FENCE}\n\n    # TODO indented code\n\nRun `make # TODO`.\n",
    ),
    "marker word as a term": (
        "TBD marker",
        "# A\n\n## Status\n\nThe release date is TBD.\n",
        '# A\n\n## What does TBD mean in the status column?\n\nRows marked TBD are unscheduled; "TODO" is a label.\n',
    ),
    "empty section": (
        "is empty",
        "# A\n\n## Setup\n\n## Usage\n\nRun it.\n",
        "# A\n\n## Setup\n\n### Linux\n\nApt.\n\n## Usage\n\nRun it.\n",
    ),
    "heading jump": (
        "jumps from H1 to H3",
        "# A\n\nText.\n\n### C\n\nText.\n",
        "# A\n\nText.\n\n## B\n\nText.\n\n### C\n\nText.\n",
    ),
    "duplicate heading": (
        "repeats the one on line 3",
        "# A\n\n## Notes\n\nx\n\n## Notes\n\ny\n",
        "# A\n\n## X\n\n### Notes\n\nx\n\n## Y\n\n### Notes\n\ny\n",
    ),
    "unclosed fence": (
        "never closed",
        f"# A\n\n{FENCE}bash\necho hi\n\n## B\n\nText.\n",
        f"# A\n\n{FENCE}bash\necho hi\n{FENCE}\n\n## B\n\nText.\n",
    ),
    "json": (
        "JSON block does not parse",
        f'# A\n\n{FENCE}json\n{{"a": 1,}}\n{FENCE}\n',
        f'# A\n\n{FENCE}json\n{{"a": 1}}\n{FENCE}\n',
    ),
    "yaml": (
        "YAML block does not parse",
        f"# A\n\n{FENCE}yaml\na: [1, 2\n{FENCE}\n",
        f"# A\n\n{FENCE}yaml\na: [1, 2]\n---\nb: 3\n{FENCE}\n",
    ),
    "python": (
        "Python block does not parse",
        f"# A\n\n{FENCE}python\ndef f(:\n    pass\n{FENCE}\n",
        f"# A\n\n{FENCE}python\n>>> def f(:\n{FENCE}\n\n{FENCE}py\ndef f():\n    pass\n{FENCE}\n",
    ),
    "anchor": (
        "matches no heading",
        "# A\n\nSee [setup](#set-up).\n\n## Setup\n\nx\n",
        "# A\n\nSee [setup](#setup), [again](#setup-1), [id](#custom).\n\n## Setup\n\nx\n\n"
        "## Setup\n\ny\n\n## Other {#custom}\n\nz\n",
    ),
    "reference": (
        "never defined",
        "# A\n\nRead [the guide][guide].\n",
        "# A\n\nRead [the guide][guide] and [Guide][].\n\n[guide]: https://example.com\n",
    ),
    "empty target": ("has no target", "# A\n\nSee [this]().\n", "# A\n\nSee [this](https://example.com).\n"),
    "spaced target": (
        "contains a space",
        "# A\n\nSee [notes](my notes.md).\n",
        '# A\n\nSee [notes](<my notes.md>) and [more](more.md "More").\n',
    ),
    "long sentence": (
        "sentence has",
        "# A\n\n" + "word " * 45 + "end.\n",
        "# A\n\n" + ("Short words here. " * 20) + "\n\n- " + "item " * 20 + "\n",
    ),
}


def messages(document: str) -> list[str]:
    return [f["message"] for f in OfflineReviewer().review_now("t", document)["findings"]]


@pytest.mark.parametrize("name", CASES)
def test_each_check_fires_on_its_problem_only(name):
    needle, bad, good = CASES[name]
    assert any(needle in m for m in messages(bad)), messages(bad)
    assert not any(needle in m for m in messages(good)), messages(good)


def test_the_report_has_the_shared_format_and_locations():
    doc = "# Guide\n\n## Install\n\nStep one. TODO finish.\n"
    report = OfflineReviewer().review_now("guide", doc)
    assert validate_report(report) == report
    assert (report["reviewer"], report["model"], report["chunks"]) == ("offline", "offline-rules-1", 1)
    assert report["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
    [f] = report["findings"]
    assert f["category"] == "completeness" and f["quote"] == "Step one. TODO finish."
    assert f["location"] == {"heading": "Guide > Install", "line_start": 5, "line_end": 5}
    assert "1 problem(s)" in report["summary"]


def test_a_clean_document_has_no_findings_and_says_so():
    report = OfflineReviewer().review_now("ok", "# Guide\n\n## Install\n\nRun `pip install docllm`.\n")
    assert report["findings"] == [] and "no problems" in report["summary"]


def test_findings_come_in_document_order_and_the_same_every_time():
    doc = "# A\n\n### Jump\n\nTBD.\n\n[x](#nowhere)\n"
    first = OfflineReviewer().review_now("t", doc)
    assert first == OfflineReviewer().review_now("t", doc)
    assert [f["location"]["line_start"] for f in first["findings"]] == [3, 5, 7]


@pytest.mark.parametrize("document", ["", " \n\n", "a\x00b"])
def test_an_unreviewable_document_is_a_permanent_error(document):
    with pytest.raises(PermanentError):
        OfflineReviewer().review_now("t", document)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_document_has_offline_findings(path):
    report = OfflineReviewer().review_now(path.stem, path.read_text(encoding="utf-8"))
    assert validate_report(report)["findings"], path.name
    lines = path.read_text(encoding="utf-8").split("\n")
    for f in report["findings"]:  # every location points into the document
        assert 1 <= f["location"]["line_start"] <= f["location"]["line_end"] <= len(lines)


def test_there_are_five_examples():
    assert len(EXAMPLES) == 5
