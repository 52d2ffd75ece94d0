"""Hostile review of branch `marks` (issue 46): two different findings must not share a
fingerprint (a mark on one would silence the other, in reports and in `docllm check --fail-on`),
and the golden set exported from judgements must let `docllm eval` see a dismissed false alarm
come back (docs/FINDINGS.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from docllm.adapters.evaluation.expectations import parse_expectations
from docllm.adapters.evaluation.export import expectations_yaml
from docllm.domain.marks.golden import golden_document
from docllm.domain.marks.model import fingerprint, mark_for
from docllm.domain.review.evaluation import compare
from docllm.domain.review.report import finding
from docllm.domain.tasks.model import Task, TaskStatus


def test_review_quote_less_findings_that_differ_only_in_their_numbers_are_two_findings():
    # "missing" findings have nothing to quote. Step 3 and step 4 are two problems; dismissing the
    # first (say, step 3 is intentionally left out) must not silence the second.
    step3 = finding("completeness", "high", "Step 3 of the install is missing.", heading="Install")
    step4 = finding("completeness", "high", "Step 4 of the install is missing.", heading="Install")
    assert fingerprint(step3) != fingerprint(step4)


def test_review_a_quote_is_not_the_same_as_the_quote_with_its_code_operators_removed():
    # `*` and backticks are removed everywhere in a quote, not only as emphasis around it:
    # "x ** 2" (a wrong operator in a Python example) and "x 2" are different text.
    power = finding("correctness", "high", "Use pow.", heading="Maths", quote="y = x ** 2")
    plain = finding("correctness", "high", "Use pow.", heading="Maths", quote="y = x 2")
    assert fingerprint(power) != fingerprint(plain)


def test_review_a_quote_is_not_the_same_as_the_quote_with_its_ends_trimmed():
    # The ends are trimmed of "+", "-", "#" ...: "C++" and "C", "--force" and "force" are one quote.
    cpp = finding("correctness", "medium", "Name the language version.", heading="Build", quote="C++")
    c = finding("correctness", "medium", "Name the language version.", heading="Build", quote="C")
    assert fingerprint(cpp) != fingerprint(c)
    flag = finding("consistency", "low", "Spell the option as the CLI does.", heading="Use", quote="--force")
    word = finding("consistency", "low", "Spell the option as the CLI does.", heading="Use", quote="force")
    assert fingerprint(flag) != fingerprint(word)


def _task(findings: list[dict]) -> Task:
    report = {"findings": findings, "summary": ""}
    return Task(
        task_id=7,
        task_name="guide.md",
        document="# Guide\n\nline\nThe tool is fast and it is done by magic.\n",
        status=TaskStatus.success,
        result=report,
    )


def test_review_an_exported_false_alarm_on_the_line_of_a_kept_finding_is_seen_when_it_comes_back():
    # Line 4 has two style findings: one real (accepted: left expected), one a false alarm.
    real = finding("style", "low", "Passive voice.", heading="Guide", line_start=4, quote="it is done")
    alarm = finding("style", "low", "Say 'quick'.", heading="Guide", line_start=4, quote="fast")
    task = _task([real, alarm])
    now = datetime.now(UTC)
    marks = [
        mark_for("guide.md", real, "accepted", "", 7, 1, "cli"),
        mark_for("guide.md", alarm, "false-alarm", "", 7, 2, "cli"),
    ]
    marks = [m.__class__(**{**m.__dict__, "marked_at": now}) for m in marks]
    doc = golden_document(task, marks, set())
    spec = parse_expectations(expectations_yaml(doc), "guide.expected.yaml")
    # The next prompt drops the real finding and brings the false alarm back:
    got = compare(spec.findings, [alarm], 0.0, spec.false_alarms)
    assert got.false_alarms == (alarm,), (got.score, got.false_alarms)


GUIDE = "# Guide\n\n## Install\n\nTODO: write the install steps.\n\n## Usage\n\nRun `tool --help`.\n"


def test_review_renaming_the_documents_title_keeps_every_mark_under_it():
    # The most common edit "around" a finding: the document's H1 ("# Guide" -> "# Guide for 2.0").
    # Every heading path starts with it, so as the fingerprint reads it every finding of the
    # document becomes another finding and every judgement on the document is lost at once.
    from typing import cast

    from docllm.adapters.offline.reviewer import OfflineReviewer
    from docllm.domain.marks.service import Judgements
    from tests.support.memory.marks import InMemoryMarkStore
    from tests.support.memory.repository import InMemoryTaskRepository

    j = Judgements(InMemoryTaskRepository(), InMemoryMarkStore())

    def reviewed(text: str) -> int:
        repo = cast(InMemoryTaskRepository, j.tasks)
        task = repo.create("guide.md", text)
        repo.start_attempt(task.task_id, "tok")
        assert repo.commit(task.task_id, 1, OfflineReviewer().review_now("guide.md", text, None))
        return task.task_id

    first = reviewed(GUIDE)
    findings = j.tasks.get(first).result["findings"]
    n = next(i for i, f in enumerate(findings, 1) if "TODO" in f["quote"])
    j.dismiss(first, n, "accepted", "tracked in DOC-12")
    second = reviewed(GUIDE.replace("# Guide", "# Guide for 2.0", 1))
    report = j.tasks.get(second).result["findings"]
    assert [f["quote"] for f in j.judged("guide.md", report).dismissed if "TODO" in f["quote"]], [
        f["location"]["heading"] for f in report
    ]
