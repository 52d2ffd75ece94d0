"""``docllm check``: documents reviewed in the command's own process, as a worker reviews a task,
then gated on a severity (the exit code of a CI job) and filtered to the lines a change touched."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from docllm.domain.errors import DocllmError
from docllm.domain.review.ports import DocumentReviewer, review_with
from docllm.domain.review.report import SEVERITIES, finding
from docllm.domain.review.rubric import Rubric

Finding = dict[str, Any]


class CheckError(DocllmError):
    """A review that could not be done (the reviewer failed): the run stops, naming the document."""


@dataclass(frozen=True)
class Source:
    """A document to check: ``path`` as the user named it (relative to the working directory when
    it is inside it), ``name`` the task name its review gets (the file's name, as at submit)."""

    path: str
    name: str
    text: str
    # False when the text was extracted (PDF, DOCX, HTML): its line numbers are not the file's, so
    # findings keep their section and lose their lines (an annotation on line 12 of a .docx is wrong).
    file_lines: bool = True
    key: str = ""  # the path as the file system and git spell it (may not be UTF-8); default: path
    unreadable: str = ""  # why the file could not be read: a finding, not a review

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.path)


@dataclass(frozen=True)
class Checked:
    source: Source
    findings: list[Finding]
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # reviewer, model: what made the report
    # Findings a person dismissed (domain/marks, issue 46): shown apart, never counted by ``failing``.
    dismissed: list[Finding] = field(default_factory=list)
    known: int | None = None  # with --baseline: findings the earlier run had, left out; None: no baseline

    @property
    def path(self) -> str:
        return self.source.path


def rank(severity: str) -> int:
    return SEVERITIES.index(severity)


def at_or_above(finding: Finding, threshold: str) -> bool:
    return rank(finding["severity"]) >= rank(threshold)


def failing(results: Sequence[Checked], threshold: str) -> int:
    """How many findings are at or above ``threshold``: the run fails (exit 1) when any is."""
    return sum(1 for r in results for f in r.findings if at_or_above(f, threshold))


def only_changed(results: Sequence[Checked], changed: Mapping[str, set[int]]) -> list[Checked]:
    """Findings whose lines touch a changed line of their file (reviewdog's ``diff_context`` filter);
    a finding without a line (a missing section, a PDF's) is kept when its file changed at all."""
    kept = []
    for r in results:
        lines = changed.get(r.source.key)
        if lines is None:
            kept.append(replace(r, findings=[], dismissed=[]))
            continue
        touched = [f for f in r.findings if _touches(f, lines)]
        kept.append(replace(r, findings=touched, dismissed=[f for f in r.dismissed if _touches(f, lines)]))
    return kept


def unread(source: Source) -> Checked:
    """A file that could not be read is a finding of its own (it gates like any other: a binary or
    Latin-1 ``.md`` in a pull request must not pass unseen), not an error that hides the others;
    an empty file is a clean document."""
    if not source.unreadable:
        return Checked(source, [], "An empty document.")
    found = {
        **finding(
            "other",
            "high",
            f"This file could not be reviewed: {source.unreadable}.",
            suggestion="Make it a readable document (UTF-8 text, Markdown, HTML, PDF or DOCX) or leave it out.",
        ),
        "check": "unreadable",
    }
    return Checked(source, [found], "The file could not be read.")


def _lineless(f: Finding) -> Finding:
    return {**f, "location": {**f["location"], "line_start": None, "line_end": None}}


def _touches(finding: Finding, lines: set[int]) -> bool:
    start, end = finding["location"]["line_start"], finding["location"]["line_end"]
    if start is None:
        return True
    return any(n in lines for n in range(start, (end or start) + 1))


async def check_documents(
    reviewer: DocumentReviewer,
    sources: Sequence[Source],
    rubric: Rubric | None = None,
    parallel: int = 4,
    progress: Callable[[Checked], None] | None = None,
) -> list[Checked]:
    """One review per source, ``parallel`` at once (an LLM reviewer waits on the network; the offline
    one runs on the loop and gains nothing), results in the sources' order."""
    gate = asyncio.Semaphore(max(1, parallel))

    async def one(source: Source) -> Checked:
        if source.unreadable or not source.text.strip():
            return unread(source)
        async with gate:
            try:
                report = await review_with(reviewer, source.name, source.text, rubric)
            except DocllmError as exc:
                raise CheckError(f"{source.path}: the review failed: {exc}") from None
        extra = {"reviewer": report.get("reviewer"), "model": report.get("model")}
        findings = [f if source.file_lines else _lineless(f) for f in report["findings"]]
        done = Checked(source, findings, report.get("summary", ""), extra)
        if progress is not None:
            progress(done)
        return done

    return list(await asyncio.gather(*(one(s) for s in sources)))


def wait_for_reports(
    task_ids: Sequence[int],
    sources: Sequence[Source],
    fetch: Callable[[list[int]], Sequence[Any]],
    timeout_s: float,
    poll_s: float,
    now: Callable[[], float],
    sleep: Callable[[float], None],
    progress: Callable[[int, int], None] | None = None,
) -> list[Checked]:
    """``docllm check --fleet``: the tasks the fleet reviews, read back once all are finished.
    ``fetch`` reads rows (``TaskViews.get_many``). A task that failed, or a wait past ``timeout_s``,
    is a CheckError naming the tasks (they stay in the fleet: ``docllm show`` reads them later)."""
    deadline = now() + timeout_s
    by_id = dict(zip(task_ids, sources, strict=True))
    while True:
        rows = {t.task_id: t for t in fetch(list(task_ids))}
        done = [i for i in task_ids if i in rows and rows[i].status.value in ("success", "failed")]
        if progress is not None:
            progress(len(done), len(task_ids))
        failed = [i for i in done if rows[i].status.value == "failed"]
        if failed:
            first = rows[failed[0]]
            raise CheckError(f"{by_id[first.task_id].path}: task {first.task_id} failed: {first.error or 'no reason'}")
        if len(done) == len(task_ids):
            break
        if now() >= deadline:
            waiting = [i for i in task_ids if i not in done]
            shown = ", ".join(map(str, waiting[:5])) + (" ..." if len(waiting) > 5 else "")
            raise CheckError(
                f"{len(waiting)} of {len(task_ids)} task(s) not finished after {timeout_s:g} s (task {shown}); "
                "they go on in the fleet: docllm status"
            )
        sleep(poll_s)
    results = []
    for task_id in task_ids:
        report = rows[task_id].result or {}
        source = by_id[task_id]
        findings = [f if source.file_lines else _lineless(f) for f in report.get("findings", [])]
        extra = {"reviewer": report.get("reviewer"), "model": report.get("model"), "task_id": task_id}
        results.append(Checked(source, findings, report.get("summary", ""), extra))
    return results
