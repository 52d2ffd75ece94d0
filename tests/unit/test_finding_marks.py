"""Findings a person judged (issue 46): the fingerprint that keeps a mark on its finding while the
document changes around it, the service both the CLI and the dashboard go through, and how
``docllm check``'s results take the marks and a baseline."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import cast

import pytest

from docllm.adapters.offline.reviewer import OfflineReviewer
from docllm.domain.marks.checked import against_baseline, with_marks
from docllm.domain.marks.model import MarkError, fingerprint
from docllm.domain.marks.service import Judgements
from docllm.domain.review.checking import Checked, Source, failing
from docllm.domain.review.report import finding
from docllm.domain.tasks.model import Task
from tests.support.memory.marks import InMemoryMarkStore
from tests.support.memory.repository import InMemoryTaskRepository

GUIDE = """# Guide

## Install

TODO: write the install steps.

## Usage

Run `tool --help`.
"""
# The same guide edited around the finding: a new section above it, a paragraph re-wrapped after it.
EDITED = """# Guide

## Requirements

Python 3.12 or later,
and a database.

## Install

TODO: write the install steps.

## Usage

Run `tool
--help`.
"""


def found(**changes) -> dict:
    base = finding(
        "completeness", "medium", "Unfinished: TODO.", heading="Guide > Install", line_start=5, quote="TODO: write"
    )
    return {**base, **changes}


# -- the fingerprint --------------------------------------------------------------------------------


def test_an_edit_around_the_finding_keeps_its_fingerprint():
    moved = found(location={"heading": "Guide >  install", "line_start": 42, "line_end": 44})
    assert fingerprint(moved) == fingerprint(found())  # other lines, heading spacing and case
    assert fingerprint(found(quote="TODO:\n   write")) == fingerprint(found())  # re-wrapped
    assert fingerprint(found(quote="ＴＯＤＯ: write")) == fingerprint(found())  # NFKC: full-width letters
    assert fingerprint(found(message="Another wording.", severity="high")) == fingerprint(found())
    # what a model varies between two answers quoting the same text
    assert fingerprint(found(quote="“TODO: write”.")) == fingerprint(found(quote='"TODO: write"'))
    assert fingerprint(found(quote="# `TODO: write`")) == fingerprint(found())
    assert fingerprint(found(quote="TODO: write…")) == fingerprint(found())


def test_a_changed_quote_rule_or_section_is_another_finding():
    assert fingerprint(found(quote="TODO: write the steps")) != fingerprint(found())
    assert fingerprint(found(quote="todo: write")) != fingerprint(found())  # a quote keeps its case
    assert fingerprint(found(quote="[x](#Limits)")) != fingerprint(found(quote="[x](#limits)"))
    assert fingerprint(found(quote="TODO - write")) != fingerprint(found())  # punctuation inside is kept
    assert fingerprint(found(category="clarity")) != fingerprint(found())
    assert fingerprint(found(check="rubric:guide/todo")) != fingerprint(found())
    assert fingerprint(found(location={"heading": "Guide > Usage", "line_start": 5, "line_end": 5})) != fingerprint(
        found()
    )


def test_a_finding_without_a_quote_is_known_by_its_message_without_its_numbers():
    a = found(quote="", message="Heading 'Limits' repeats the one on line 37 under the same parent.")
    assert fingerprint({**a, "message": a["message"].replace("37", "52")}) == fingerprint(a)
    assert fingerprint({**a, "message": "Heading 'Setup' repeats the one on line 37."}) != fingerprint(a)


# -- the service ----------------------------------------------------------------------------------


@pytest.fixture
def judgements() -> Judgements:
    return Judgements(InMemoryTaskRepository(), InMemoryMarkStore())


def reviewed(j: Judgements, name: str, text: str) -> int:
    report = OfflineReviewer().review_now(name, text, None)
    repo = cast(InMemoryTaskRepository, j.tasks)
    task = repo.create(name, text)
    repo.start_attempt(task.task_id, "tok")
    assert repo.commit(task.task_id, 1, report)
    return task.task_id


def row(j: Judgements, task_id: int) -> Task:
    found = j.tasks.get(task_id)
    assert found is not None
    return found


def number_of(j: Judgements, task_id: int, quote: str) -> int:
    findings = row(j, task_id).result["findings"]
    return next(n for n, f in enumerate(findings, 1) if quote in f["quote"])


def test_a_dismissed_finding_stays_dismissed_on_the_next_review_of_the_edited_document(judgements):
    first = reviewed(judgements, "guide.md", GUIDE)
    n = number_of(judgements, first, "TODO")
    mark = judgements.dismiss(first, n, "accepted", "  tracked in   DOC-12 ", by="cli:ana")
    assert (mark.document, mark.reason, mark.note, mark.task_id, mark.number) == (
        "guide.md",
        "accepted",
        "tracked in DOC-12",
        first,
        n,
    )

    second = reviewed(judgements, "guide.md", EDITED)
    report = row(judgements, second).result
    todo = [f for f in report["findings"] if "TODO" in f["quote"]]
    assert todo and todo[0]["location"]["line_start"] != 5  # it moved
    judged = judgements.judged("guide.md", report["findings"])
    assert [f["quote"] for f in judged.dismissed] == [todo[0]["quote"]]
    assert judged.dismissed[0]["dismissed"]["reason"] == "accepted"
    assert all("TODO" not in f["quote"] for f in judged.active)
    assert judgements.of_task(row(judgements, second)) == {number_of(judgements, second, "TODO"): mark}
    # another document of other text keeps its finding: marks are by document name
    assert len(judgements.judged("other.md", report["findings"]).dismissed) == 0


def test_a_judgement_on_one_tenants_task_leaves_another_tenants_document_alone(judgements):
    repo = cast(InMemoryTaskRepository, judgements.tasks)
    report = OfflineReviewer().review_now("guide.md", GUIDE, None)
    ids = []
    for tenant in ("acme", "globex"):
        task = repo.create("guide.md", GUIDE, tenant=tenant)
        repo.start_attempt(task.task_id, "tok")
        assert repo.commit(task.task_id, 1, report)
        ids.append(task.task_id)
    n = number_of(judgements, ids[0], "TODO")
    assert judgements.dismiss(ids[0], n, "false-alarm").tenant == "acme"
    assert judgements.of_task(row(judgements, ids[0])) != {}
    assert judgements.of_task(row(judgements, ids[1])) == {}  # globex's guide.md still counts it
    assert judgements.judged("guide.md", report["findings"]).dismissed == []  # nor does a check without one
    assert len(judgements.judged("guide.md", report["findings"], "acme").dismissed) == 1


def test_the_latest_judgement_wins_and_restore_takes_it_off(judgements):
    task = reviewed(judgements, "guide.md", GUIDE)
    n = number_of(judgements, task, "TODO")
    judgements.dismiss(task, n, "accepted")
    judgements.dismiss(task, n, "false-alarm", "not a TODO: a quoted label")
    [only] = judgements.marks.listed()
    assert (only.reason, only.note) == ("false-alarm", "not a TODO: a quoted label")
    assert judgements.restore(task, n) is True
    assert judgements.marks.listed() == [] and judgements.restore(task, n) is False


@pytest.mark.parametrize(
    ("task", "number", "reason", "note", "says"),
    [
        (1, 1, "fine", "", "reason must be one of false-alarm, accepted, wont-fix"),
        (99, 1, "accepted", "", "no task with id 99"),
        (1, 0, "accepted", "", "give a number from 1 to"),
        (1, 1000, "accepted", "", "give a number from 1 to"),
        (1, 1, "accepted", "x" * 1001, "a note is at most 1000 characters"),
        (2, 1, "accepted", "", "task 2 has no report to judge (it is pending)"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(judgements, task, number, reason, note, says):
    reviewed(judgements, "guide.md", GUIDE)
    cast(InMemoryTaskRepository, judgements.tasks).create("waiting.md", GUIDE)
    with pytest.raises(MarkError, match=says.replace("(", r"\(").replace(")", r"\)")):
        judgements.dismiss(task, number, reason, note)
    assert judgements.marks.listed() == []


# -- docllm check ----------------------------------------------------------------------------------


def checked(name: str, text: str) -> Checked:
    report = OfflineReviewer().review_now(name, text, None)
    return Checked(Source(f"docs/{name}", name, text), report["findings"])


def test_check_shows_a_dismissed_finding_apart_and_does_not_fail_on_it(judgements):
    task = reviewed(judgements, "guide.md", GUIDE)
    judgements.dismiss(task, number_of(judgements, task, "TODO"), "wont-fix")
    before = [checked("guide.md", EDITED)]
    assert failing(before, "medium") >= 1
    after = with_marks(before, judgements.marks.for_documents(["guide.md"]))
    assert failing(after, "medium") == failing(before, "medium") - 1
    assert [f["dismissed"]["reason"] for f in after[0].dismissed] == ["wont-fix"]
    # a broken mechanism (no marks) would leave it counted: the same call without them
    assert failing(with_marks(before, {}), "medium") == failing(before, "medium")


def test_a_baseline_leaves_out_what_the_earlier_run_had_and_counts_repeats():
    old = checked("guide.md", GUIDE)
    seen = Counter((r.source.path, fingerprint(f)) for r in [old] for f in r.findings)
    new = checked("guide.md", EDITED.replace("## Usage", "## Usage\n\nFIXME: explain the flags."))
    [result] = against_baseline([new], seen, lambda s: s.path)
    assert [f["quote"] for f in result.findings] == ["FIXME: explain the flags."]
    assert result.known == len(new.findings) - 1
    twice = replace(new, findings=[*new.findings, new.findings[0]])  # one more alike than before
    [result] = against_baseline([twice], seen, lambda s: s.path)
    assert len(result.findings) == 2


def test_an_exported_documents_file_name_is_safe_unique_and_found_alone_by_its_expectations():
    from docllm.domain.marks.golden import file_name

    taken: set[str] = set()
    names = [file_name(n, taken) for n in ("guide.md", "manual.pdf", "../../etc/passwd", "guide.md", "a b.txt", ".md")]
    assert names == ["guide.md", "manual-pdf.md", "passwd.md", "guide-2.md", "a-b.txt", "document.md"]
    stems = [n.rsplit(".", 1)[0] for n in names]
    assert all("." not in s and "/" not in s for s in stems)  # NAME.expected.yaml finds one document
    assert all(sum(n.startswith(s + ".") for n in names) == 1 for s in stems)


def test_a_mark_finds_its_finding_under_a_renamed_heading_only_when_it_is_the_only_one_alike(judgements):
    text = "# Guide\n\n## Install\n\nTODO: fix.\n\n## Usage\n\nTODO: fix.\n"
    task = reviewed(judgements, "guide.md", text)
    findings = row(judgements, task).result["findings"]
    install = next(n for n, f in enumerate(findings, 1) if f["location"]["heading"] == "Guide > Install")
    judgements.dismiss(task, install, "accepted")
    renamed = reviewed(
        judgements, "guide.md", text.replace("## Install", "## Setup").replace("## Usage\n\nTODO: fix.\n", "")
    )
    assert len(judgements.of_task(row(judgements, renamed))) == 1  # the only TODO: fix. left, moved
    both = reviewed(judgements, "guide.md", text.replace("## Install", "## Setup"))
    assert judgements.of_task(row(judgements, both)) == {}  # two alike and the heading changed: neither
